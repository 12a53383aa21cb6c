/*
Copyright 2026 The CAPKV Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command kvexp (step 5 groundwork, not for main) starts a bare API server
// with the aggregation layer configured from front-proxy certificates in
// the directory given as first argument, writes a kubeconfig to the second,
// and waits until interrupted.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

func main() {
	dir, kubeconfig := os.Args[1], os.Args[2]
	env, err := testenv.Start(testenv.Options{WithoutProviderCRDs: true, APIServerArgs: map[string]string{
		"requestheader-client-ca-file":       filepath.Join(dir, "ca.crt"),
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             filepath.Join(dir, "client.crt"),
		"proxy-client-key-file":              filepath.Join(dir, "client.key"),
		"enable-aggregator-routing":          "true",
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := env.WriteKubeconfig(kubeconfig, "admin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	fmt.Println("up")
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	<-ch
	_ = env.Stop()
}

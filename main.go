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

// Command manager runs the CAPKV controllers and webhooks.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	// The image is built from scratch: infra API servers whose kubeconfig
	// carries no CA are verified against Mozilla's roots, compiled in.
	_ "golang.org/x/crypto/x509roots/fallback"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // enables --logging-format=json
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/version"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/preflight"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == preflight.Command {
		os.Exit(preflight.Main(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdout, os.Stderr))
	}
	var (
		o              manager.Options
		managerOptions flags.ManagerOptions
		logOptions     = logs.NewOptions()
		printVersion   bool
	)
	fs := pflag.CommandLine
	logsv1.AddFlags(logOptions, fs)
	manager.AddFlags(fs, &o)
	fs.BoolVar(&printVersion, "version", false, "Print the version and exit.")
	flags.AddManagerOptions(fs, &managerOptions)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()

	if printVersion {
		fmt.Println(version.String())
		return
	}
	if err := logsv1.ValidateAndApply(logOptions, nil); err != nil {
		fmt.Fprintf(os.Stderr, "invalid logging flags: %v\n", err)
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")

	tlsOpts, metricsOpts, err := flags.GetManagerOptions(managerOptions)
	if err != nil {
		log.Error(err, "invalid TLS or diagnostics flags")
		os.Exit(1)
	}
	o.TLSOpts, o.Metrics = tlsOpts, *metricsOpts
	o.PodName = os.Getenv("POD_NAME")

	ctx := ctrl.SetupSignalHandler()
	mgr, err := manager.New(ctx, ctrl.GetConfigOrDie(), o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting manager", "version", version.String())
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

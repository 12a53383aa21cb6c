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

package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// ProfileDirEnv names the variable that, when set to a directory, has every
// environment write CPU profiles of its kube-apiserver there, one per
// profileWindow, until it stops (docs/testing.md, "Time budget"): the API
// servers use the most CPU of the suite.
const ProfileDirEnv = "CAPKV_APISERVER_PROFILES"

const profileWindow = 20 * time.Second

// profileAPIServer starts writing the API server's CPU profiles when
// ProfileDirEnv is set; the returned function stops it.
func profileAPIServer(cfg *rest.Config) func() {
	dir := os.Getenv(ProfileDirEnv)
	if dir == "" {
		return func() {}
	}
	_ = os.MkdirAll(dir, 0o750) //nolint:gosec // the directory the developer named for the profiles
	c := rest.CopyConfig(cfg)
	c.Timeout = 2 * profileWindow
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return func() {}
	}
	name := fmt.Sprintf("apiserver-%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			data, err := rc.Get().AbsPath("/debug/pprof/profile").
				Param("seconds", fmt.Sprint(int(profileWindow.Seconds()))).DoRaw(ctx)
			if err != nil {
				return
			}
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", name, i)), data, 0o600) //nolint:gosec // see above
		}
	}()
	return func() {
		// The request counts say which clients cost the CPU.
		if data, err := rc.Get().AbsPath("/metrics").DoRaw(context.Background()); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+".metrics"), data, 0o600) //nolint:gosec // see above
		}
		cancel()
		<-done
	}
}

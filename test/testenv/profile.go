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

// AuditDirEnv names the variable that, when set to a directory, has every
// API server write an audit log there (one line per request: who, verb,
// resource), to find which client makes the requests that cost the CPU.
const AuditDirEnv = "CAPKV_APISERVER_AUDIT"

// auditPolicy logs every request once, when it completes, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
`

// auditFlags are the API server flags of AuditDirEnv, none when unset; the
// policy file goes to scratch, a directory the environment removes.
func auditFlags(scratch string) (map[string]string, error) {
	dir := os.Getenv(AuditDirEnv)
	if dir == "" {
		return nil, nil
	}
	policy := filepath.Join(scratch, "audit-policy.yaml")
	if err := os.MkdirAll(dir, 0o750); err != nil { //nolint:gosec // the directory the developer named
		return nil, fmt.Errorf("%s: %w", AuditDirEnv, err)
	}
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    filepath.Join(dir, fmt.Sprintf("audit-%d-%d.log", os.Getpid(), time.Now().UnixNano())),
		"audit-log-maxsize": "0",
		"audit-log-format":  "json",
		"audit-log-mode":    "batch",
	}, nil
}

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

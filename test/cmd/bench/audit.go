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

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// audit has the management API server log one audit event per request of
// the measured user, when the request is received, and counts them. The
// count is the API server's, so it holds for any provider, whatever client
// library it uses, and leaves out requests to the tenant clusters.
type audit struct {
	policyPath, logPath string
}

func newAudit(dir, user string) (*audit, error) {
	a := &audit{policyPath: filepath.Join(dir, "bench-audit-policy.yaml"), logPath: filepath.Join(dir, "bench-audit.log")}
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  users: [%q]
- level: None
`, user)
	if err := os.WriteFile(a.policyPath, []byte(policy), 0o600); err != nil {
		return nil, err
	}
	if err := os.Remove(a.logPath); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return a, nil
}

func (a *audit) apiServerArgs() map[string]string {
	// The log backend writes each event before the request proceeds
	// (blocking mode), so the file is complete when counted.
	return map[string]string{"audit-policy-file": a.policyPath, "audit-log-path": a.logPath,
		"audit-log-format": "json", "audit-log-mode": "blocking", "audit-log-maxsize": "0"}
}

// requestCounts are requests by verb and by resource.
type requestCounts struct {
	byVerb, byResource map[string]int
	total              int
}

func (a *audit) count() (requestCounts, error) {
	f, err := os.Open(a.logPath)
	if err != nil {
		return requestCounts{}, fmt.Errorf("reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	c := requestCounts{byVerb: map[string]int{}, byResource: map[string]int{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return c, fmt.Errorf("parsing the audit log: %w", err)
		}
		if ev.Stage != "RequestReceived" {
			continue
		}
		c.total++
		c.byVerb[ev.Verb]++
		resource := "(non-resource)"
		if ev.ObjectRef != nil {
			resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				resource += "/" + ev.ObjectRef.Subresource
			}
		}
		c.byResource[resource]++
	}
	return c, sc.Err()
}

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
	"time"
)

// audit has the management API server log the measured user's requests
// when they are answered, and counts the ones that succeeded. The count is
// the API server's, so it holds for any provider, whatever client library
// it uses, and leaves out requests to the tenant clusters.
type audit struct {
	policyPath, logPath string
}

func newAudit(dir, user string) (*audit, error) {
	a := &audit{policyPath: filepath.Join(dir, "bench-audit-policy.yaml"), logPath: filepath.Join(dir, "bench-audit.log")}
	// A request is logged when its response is complete, and a watch also
	// when it starts: a watch that is still open when the log is read has
	// only that event.
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, Panic]
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

// request is one successful request of the measured user.
type request struct {
	verb, resource, namespace, name string
	// received is when the API server received it.
	received time.Time
}

// requests reads the successful requests from the audit log, each once.
// A request failed when its response code is not 2xx: a conflict, a
// refusal or a missing object changed nothing.
func (a *audit) requests() ([]request, error) {
	f, err := os.Open(a.logPath)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []request
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			AuditID   string    `json:"auditID"`
			Verb      string    `json:"verb"`
			Received  time.Time `json:"requestReceivedTimestamp"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("parsing the audit log: %w", err)
		}
		if seen[ev.AuditID] || ev.ResponseStatus == nil || ev.ResponseStatus.Code < 200 || ev.ResponseStatus.Code > 299 {
			continue
		}
		seen[ev.AuditID] = true
		r := request{verb: ev.Verb, resource: "(non-resource)", received: ev.Received}
		if ref := ev.ObjectRef; ref != nil {
			r.resource, r.namespace, r.name = ref.Resource, ref.Namespace, ref.Name
			if ref.Subresource != "" {
				r.resource += "/" + ref.Subresource
			}
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

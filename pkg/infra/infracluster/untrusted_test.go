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

package infracluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWithholdForeignBodies(t *testing.T) {
	status := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"virtualmachines \"x\" is forbidden","reason":"Forbidden","code":403}`
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
		want                    string
	}{
		{name: "an internal service's page", contentType: "text/html", body: "<h1>db admin: root/hunter2</h1>", code: 401, want: withheldBody},
		{name: "JSON that is not a Status", contentType: "application/json", body: `{"secret":"hunter2"}`, code: 500, want: withheldBody},
		{name: "a Kubernetes Status", contentType: "application/json", body: status, code: 403, want: status},
		{name: "a success", contentType: "text/plain", body: "ok", code: 200, want: "ok"},
		{name: "a redirect not followed", contentType: "text/html", body: "<a href=/admin>moved, token=hunter2</a>", code: 300, want: withheldBody},
		{name: "a 2xx client-go takes for an error", contentType: "text/xml", body: "<multistatus>root/hunter2</multistatus>", code: 207, want: withheldBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := &http.Client{Transport: withholdForeignBodies(http.DefaultTransport)}
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(got) != tc.want || resp.StatusCode != tc.code {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, got, tc.code, tc.want)
			}
		})
	}
}

func TestPlainHTTPInfraServerRefused(t *testing.T) {
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: infra
  cluster:
    server: http://10.0.0.1:8080
contexts:
- name: infra
  context: {cluster: infra, user: u}
current-context: infra
users:
- name: u
  user: {token: t}
`
	_, err := restConfig([]byte(kubeconfig))
	if err == nil || !strings.Contains(err.Error(), "only https://") {
		t.Fatalf("got %v, want a refusal of plain HTTP", err)
	}
}

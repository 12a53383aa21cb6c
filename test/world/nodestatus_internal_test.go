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

package world

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestNodeStatus(t *testing.T) {
	for _, tt := range []struct {
		name, method, path, contentType, body string
		// wantPath and wantBody are what reaches the API server; wantCode
		// is the answer when nothing does.
		wantPath, wantBody string
		wantCode           int
	}{
		{name: "a merge patch of the status goes to the Node, without its spec", method: http.MethodPatch, path: "/api/v1/nodes/n1/status",
			contentType: "application/merge-patch+json", body: `{"spec":{"unschedulable":true},"status":{"conditions":[]}}`,
			wantPath: "/api/v1/nodes/n1", wantBody: `{"status":{"conditions":[]}}`},
		{name: "a strategic merge patch is refused", method: http.MethodPatch, path: "/api/v1/nodes/n1/status",
			contentType: "application/strategic-merge-patch+json", body: `{"status":{}}`, wantCode: http.StatusUnsupportedMediaType},
		{name: "a body that is not an object is refused", method: http.MethodPatch, path: "/api/v1/nodes/n1/status",
			contentType: "application/merge-patch+json", body: `[]`, wantCode: http.StatusBadRequest},
		{name: "a read of the status passes unchanged", method: http.MethodGet, path: "/api/v1/nodes/n1/status",
			wantPath: "/api/v1/nodes/n1/status", wantBody: ""},
		{name: "a patch of the Node itself passes unchanged", method: http.MethodPatch, path: "/api/v1/nodes/n1",
			contentType: "application/strategic-merge-patch+json", body: `{"spec":{}}`, wantPath: "/api/v1/nodes/n1", wantBody: `{"spec":{}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var gotPath, gotBody string
			reached := false
			handler := nodeStatus(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				reached = true
				gotPath = r.URL.Path
				b, err := io.ReadAll(r.Body)
				g.Expect(err).NotTo(HaveOccurred())
				gotBody = string(b)
				g.Expect(r.ContentLength).To(BeEquivalentTo(len(b)))
			}))
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if tt.wantCode != 0 {
				g.Expect(reached).To(BeFalse())
				g.Expect(rec.Code).To(Equal(tt.wantCode))
				g.Expect(rec.Body.String()).To(ContainSubstring(`"kind":"Status"`))
				return
			}
			g.Expect(reached).To(BeTrue())
			g.Expect(gotPath).To(Equal(tt.wantPath))
			g.Expect(gotBody).To(Equal(tt.wantBody))
		})
	}
}

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
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

func TestWithUIDsGivesCreatesAUID(t *testing.T) {
	for _, tt := range []struct {
		name, method, contentType, body string
		wantUID                         string // "-": the body passes unchanged
	}{
		{"a create gets one", http.MethodPost, "application/json", `{"kind":"Service","metadata":{"name":"web"}}`, ""},
		{"a UID sent is replaced", http.MethodPost, "application/json", `{"metadata":{"name":"web","uid":"u-1"}}`, ""},
		{"an update passes unchanged", http.MethodPut, "application/json", `{"metadata":{"name":"web"}}`, "-"},
		{"a body it cannot read passes unchanged", http.MethodPost, "application/vnd.kubernetes.protobuf", `k8s...`, "-"},
		{"a kind the scheme lacks gets one", http.MethodPost, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"web"}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var got []byte
			handler := withUIDs(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				var err error
				got, err = io.ReadAll(r.Body)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.ContentLength).To(BeEquivalentTo(len(got)))
			}))
			req := httptest.NewRequest(tt.method, "/api/v1/namespaces/default/services", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			handler.ServeHTTP(httptest.NewRecorder(), req)
			if tt.wantUID == "-" {
				g.Expect(string(got)).To(Equal(tt.body))
				return
			}
			var obj struct {
				Metadata struct{ UID, Name string } `json:"metadata"`
			}
			g.Expect(json.Unmarshal(got, &obj)).To(Succeed())
			g.Expect(obj.Metadata.Name).To(Equal("web"))
			g.Expect(obj.Metadata.UID).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		})
	}
}

func TestWithUIDsReadsProtobuf(t *testing.T) {
	g := NewWithT(t)
	const proto = "application/vnd.kubernetes.protobuf"
	info, ok := runtime.SerializerInfoForMediaType(createCodecs.SupportedMediaTypes(), proto)
	g.Expect(ok).To(BeTrue())
	var body bytes.Buffer
	g.Expect(info.Serializer.Encode(&corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"}}, &body)).To(Succeed())
	var got runtime.Object
	handler := withUIDs(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		g.Expect(err).NotTo(HaveOccurred())
		got, _, err = info.Serializer.Decode(b, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/services", &body)
	req.Header.Set("Content-Type", proto)
	handler.ServeHTTP(httptest.NewRecorder(), req)
	g.Expect(got).To(BeAssignableToTypeOf(&corev1.Service{}))
	g.Expect(got.(*corev1.Service).Name).To(Equal("web"))
	g.Expect(string(got.(*corev1.Service).UID)).To(MatchRegexp(`^[0-9a-f-]{36}$`))
}

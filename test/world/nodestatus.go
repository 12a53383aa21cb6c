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
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// nodeStatusPath is the path of a Node's status subresource.
var nodeStatusPath = regexp.MustCompile(`^/api/v1/nodes/([^/]+)/status$`)

// maxNodeStatusPatch bounds the body read: kube-apiserver takes up to
// 3 MiB for a request body.
const maxNodeStatusPatch = 3 << 20

// nodeStatus serves a JSON merge patch of a Node's status subresource,
// which Cluster API's in-memory API server has no route for (its handler
// routes PATCH at /api/v1/{resource}/{name} only), as a patch of the Node
// without the patch's spec: kube-apiserver's node status strategy
// (pkg/registry/core/node/strategy.go, nodeStatusStrategy.PrepareForUpdate)
// keeps the stored spec and applies the rest, metadata included. Other
// patch types get 415: the in-memory server would apply a strategic merge
// patch as a JSON merge patch, which replaces lists that a strategic one
// merges by key (the Node's conditions). Every other request passes on.
// Cluster API's e2e framework marks a Node unhealthy this way
// (framework.PatchNodeCondition).
func nodeStatus(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		match := nodeStatusPath.FindStringSubmatch(r.URL.Path)
		if match == nil || r.Method != http.MethodPatch {
			next.ServeHTTP(rw, r)
			return
		}
		if media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || media != "application/merge-patch+json" {
			writeStatus(rw, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				fmt.Sprintf("the world serves only application/merge-patch+json on nodes/%s/status, not %q", match[1], r.Header.Get("Content-Type")))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxNodeStatusPatch))
		var patch map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(body, &patch)
		}
		if err != nil {
			writeStatus(rw, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the patch of nodes/%s/status is not a JSON object: %v", match[1], err))
			return
		}
		delete(patch, "spec")
		if body, err = json.Marshal(patch); err != nil {
			writeStatus(rw, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
			return
		}
		node := r.Clone(r.Context())
		node.URL.Path, node.URL.RawPath = "/api/v1/nodes/"+match[1], ""
		node.Body, node.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(rw, node)
	})
}

// writeStatus answers with a Kubernetes Status, as kube-apiserver does.
func writeStatus(rw http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	})
}

// maxCreateBody bounds the body of a create the world reads, as
// kube-apiserver bounds a request body (3 MiB).
const maxCreateBody = 3 << 20

// createCodecs decode and encode the kinds clients create through the
// proxy, in JSON or protobuf (client-go sends built-in kinds as protobuf).
var createCodecs = serializer.NewCodecFactory(clientgoscheme.Scheme)

// withUIDs gives each object created through the proxy a UID, as
// kube-apiserver does on every create (metadata.uid; the in-memory server
// leaves it empty, its cache's hooks say "TODO: UID"). Controllers key
// what they make on it: the CCM names a LoadBalancer Service's infra
// Service after it. A body it cannot read passes unchanged. Objects the
// world writes to the in-memory server directly, and clusters served on
// the mux alone, still have none.
func withUIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		info, ok := runtime.SerializerInfoForMediaType(createCodecs.SupportedMediaTypes(), media)
		if r.Method != http.MethodPost || !ok {
			next.ServeHTTP(rw, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCreateBody+1))
		if err != nil {
			writeStatus(rw, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		if len(body) > maxCreateBody {
			writeStatus(rw, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "the request body is larger than 3 MiB")
			return
		}
		if withUID, err := setUID(info, body); err == nil {
			body = withUID
		}
		created := r.Clone(r.Context())
		created.Body, created.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(rw, created)
	})
}

// setUID gives the encoded object a new UID, replacing any it carries as
// kube-apiserver does (FillObjectMetaSystemFields): a kind of the scheme
// through its serializer, any other JSON object as a map.
func setUID(info runtime.SerializerInfo, body []byte) ([]byte, error) {
	if obj, _, err := info.Serializer.Decode(body, nil, nil); err == nil {
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		accessor.SetUID(uuid.NewUUID())
		var buf bytes.Buffer
		err = info.Serializer.Encode(obj, &buf)
		return buf.Bytes(), err
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		return body, nil
	}
	m["uid"] = string(uuid.NewUUID())
	return json.Marshal(obj)
}

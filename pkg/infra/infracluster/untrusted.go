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
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxStatusBody is the most of an error response read to tell whether it
// is a Kubernetes Status.
const maxStatusBody = 64 << 10

// withheldBody replaces an error response that is not a Kubernetes Status.
const withheldBody = "the server answered with something other than a Kubernetes Status; its body is withheld"

// withholdForeignBodies wraps the transport of an external infra cluster,
// whose kubeconfig a tenant may write: a response client-go reports as an
// error, whose body is not a Kubernetes Status, has its body replaced before client-go quotes it into
// an error, and so into a condition or an Event. Otherwise a kubeconfig
// pointed at any service the provider can reach would read that service's
// answers back to the tenant.
func withholdForeignBodies(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		// client-go takes 200 to 206 as success and decodes an object
		// from them; any other code (207 to 299 and redirects too) is an
		// error whose text quotes the body.
		if err != nil || (resp.StatusCode >= http.StatusOK && resp.StatusCode <= http.StatusPartialContent) {
			return resp, err
		}
		body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
		_ = resp.Body.Close()
		if readErr == nil && isStatus(resp.Header.Get("Content-Type"), body) {
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return resp, nil
		}
		resp.Body = io.NopCloser(strings.NewReader(withheldBody))
		resp.ContentLength = int64(len(withheldBody))
		resp.Header = resp.Header.Clone()
		resp.Header.Set("Content-Type", "text/plain")
		resp.Header.Del("Content-Encoding")
		return resp, nil
	})
}

// isStatus reports whether an error body is a JSON Kubernetes Status, the
// only error body an API server sends that client-go reports.
func isStatus(contentType string, body []byte) bool {
	if !strings.HasPrefix(contentType, "application/json") {
		return false
	}
	var s metav1.Status
	return json.Unmarshal(body, &s) == nil && s.Kind == "Status" && s.APIVersion == "v1"
}

// httpsOnly refuses an infra API server reached over plain HTTP: the
// provider's requests carry the kubeconfig's credentials, and its answers
// are trusted.
func httpsOnly(name, server string) error {
	if !strings.HasPrefix(server, "https://") {
		return fmt.Errorf("cluster %q has server %q: only https:// infra API servers are allowed", name, server)
	}
	return nil
}

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

package metrics

import (
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// InstrumentConfig makes every request sent with cfg observed under the
// infra cluster's name: its latency (watches left out, as they last until
// closed) and its failures. The failures without a response start at zero,
// so that a rate over them reads 0, not nothing, while all is well.
func InstrumentConfig(cfg *rest.Config, infraCluster string) {
	InfraClusterRequestErrors.WithLabelValues(infraCluster, NoResponse)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return instrumented{next: rt, infraCluster: infraCluster}
	})
}

// NoResponse is the code of a request that got no response.
const NoResponse = "error"

type instrumented struct {
	next         http.RoundTripper
	infraCluster string
}

func (t instrumented) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if w := req.URL.Query().Get("watch"); w != "true" && w != "1" {
		InfraClusterRequestSeconds.WithLabelValues(t.infraCluster, req.Method).Observe(time.Since(start).Seconds())
	}
	switch {
	case err != nil:
		InfraClusterRequestErrors.WithLabelValues(t.infraCluster, NoResponse).Inc()
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		InfraClusterRequestErrors.WithLabelValues(t.infraCluster, strconv.Itoa(resp.StatusCode)).Inc()
	}
	return resp, err
}

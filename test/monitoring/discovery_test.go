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

package monitoring_test

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/test/monitoring"
)

// TestShippedRBACLetsPrometheusDiscover asks the real RBAC authorizer
// whether kube-prometheus's Prometheus, with config/prometheus/rbac.yaml
// applied (by the suite, as an operator does), may do what the Prometheus
// Operator's service discovery does for the ServiceMonitor: list and watch
// the Services, Endpoints, EndpointSlices and Pods of the provider's
// namespace. Other namespaces stay closed to it, so the permission comes
// from the shipped Role and nothing broader.
func TestShippedRBACLetsPrometheusDiscover(t *testing.T) {
	ctx := context.Background()
	discovery := []authorizationv1.ResourceAttributes{
		{Resource: "services"}, {Resource: "endpoints"}, {Resource: "pods"},
		{Group: "discovery.k8s.io", Resource: "endpointslices"},
	}
	for _, ns := range []string{monitoring.ProviderNamespace, "kube-public"} {
		for _, ra := range discovery {
			for _, verb := range []string{"list", "watch"} {
				ra.Namespace, ra.Verb = ns, verb
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:               "system:serviceaccount:monitoring:prometheus-k8s",
					Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"},
					ResourceAttributes: &ra,
				}}
				if err := w.Env.Client.Create(ctx, sar); err != nil {
					t.Fatal(err)
				}
				want := ns == monitoring.ProviderNamespace
				if sar.Status.Allowed != want {
					t.Errorf("%s %s.%s in %s: allowed %t, want %t (%s)", verb, ra.Resource, ra.Group, ns, sar.Status.Allowed, want, sar.Status.Reason)
				}
			}
		}
	}
}

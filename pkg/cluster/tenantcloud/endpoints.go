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

package tenantcloud

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// APIEndpoints are the addresses at which the tenant's VMs reach the
// infra API server, for the isolation policies to let them through: the
// credential's server, and, on the management cluster reached at its
// in-cluster address, the endpoints of its kubernetes Service, which is
// where that traffic goes once kube-proxy has translated it (most
// NetworkPolicy implementations judge the translated address). Host names
// are left out; docs/tenant-cloud.md says how to open them.
func APIEndpoints(ctx context.Context, infra *infracluster.Infra, spec infrav1.TenantCloudSpec) ([]isolation.HostPort, error) {
	if !spec.Enabled() {
		return nil, nil
	}
	var out []isolation.HostPort
	u, err := url.Parse(cmp.Or(spec.InfraServer, infra.Server))
	if err != nil {
		return nil, fmt.Errorf("infra API server %q: %w", cmp.Or(spec.InfraServer, infra.Server), err)
	}
	port := 443
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("infra API server %q: port: %w", u, err)
		}
	}
	out = append(out, isolation.HostPort{Host: u.Hostname(), Port: int32(port)}) //nolint:gosec // a URL port fits
	if infra.External || spec.InfraServer != "" {
		return out, nil
	}
	apiServer := &discoveryv1.EndpointSliceList{}
	if err := infra.APIReader.List(ctx, apiServer, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("listing the endpoints of the infra API server: %w", err)
	}
	for _, s := range apiServer.Items {
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				for _, addr := range e.Addresses {
					out = append(out, isolation.HostPort{Host: addr, Port: *p.Port})
				}
			}
		}
	}
	return out, nil
}

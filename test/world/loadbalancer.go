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
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// lbBackend serves a tenant's control-plane load balancer address with a
// proxy to the tenant's in-memory API server (lbproxy.go), whose serving
// certificate names that address, as the endpoint Cluster API connects to.
type lbBackend struct {
	workloads *Workloads
}

var _ sim.LoadBalancerBackend = &lbBackend{}

var _ sim.LoadBalancerServer = &lbBackend{}

// ServeOn implements sim.LoadBalancerServer: a tenant's control-plane
// Service port is served on the load balancer's address and port by the
// tenant's proxy.
func (b *lbBackend) ServeOn(ctx context.Context, svc *corev1.Service, port corev1.ServicePort, ip string) (bool, error) {
	key, ok := tenantOf(svc)
	if !ok {
		return false, nil
	}
	_, err := b.workloads.EnsureClusterAt(ctx, key, ip, port.Port)
	return err == nil, err
}

// Backend implements sim.LoadBalancerBackend for Services that are not a
// tenant's control plane: there is nothing to forward to.
func (b *lbBackend) Backend(context.Context, *corev1.Service, corev1.ServicePort) (string, bool) {
	return "", false
}

// tenantOf reads which tenant cluster a control-plane Service fronts, from
// its selector: cluster name and control-plane role, and the machines'
// namespace where this provider adds it (others keep Service and machines
// in the cluster's namespace).
func tenantOf(svc *corev1.Service) (types.NamespacedName, bool) {
	sel := svc.Spec.Selector
	key := types.NamespacedName{Namespace: sel[infrav1.KubevirtMachineNamespaceLabel], Name: sel[infrav1.ClusterNameLabel]}
	if key.Namespace == "" {
		key.Namespace = svc.Namespace
	}
	return key, key.Namespace != "" && key.Name != "" && sel[infrav1.RoleLabel] == infrav1.RoleControlPlane
}

// ensureBehindLoadBalancer creates the tenant's workload cluster on the
// address of its control-plane load balancer or ClusterIP Service, if it
// has one yet, so that
// the first machine can join before anyone connected through it.
func (w *Workloads) ensureBehindLoadBalancer(ctx context.Context, infra client.Reader, vmNamespace string, key types.NamespacedName) error {
	services := &corev1.ServiceList{}
	if err := infra.List(ctx, services, client.InNamespace(vmNamespace), client.MatchingLabels{infrav1.ClusterNameLabel: key.Name}); err != nil {
		return err
	}
	for i := range services.Items {
		svc := &services.Items[i]
		tenant, ok := tenantOf(svc)
		if !ok || tenant != key || len(svc.Spec.Ports) == 0 {
			continue
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && sim.IngressIP(svc) != "" {
			_, err := w.EnsureClusterAt(ctx, key, sim.IngressIP(svc), svc.Spec.Ports[0].Port)
			return err
		}
		if ip := net.ParseIP(svc.Spec.ClusterIP); (svc.Spec.Type == corev1.ServiceTypeClusterIP || svc.Spec.Type == corev1.ServiceTypeNodePort) && ip != nil && ip.IsLoopback() {
			_, err := w.EnsureClusterAt(ctx, key, svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
			return err
		}
	}
	return nil
}

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

package controlplaneservice

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// LoadBalancerFallback says when, and to what, the endpoint of a
// LoadBalancer Service that gets no address falls back: an infra cluster
// without a load-balancer implementation (bare metal without MetalLB)
// never gives one, and the default flavor asks for a LoadBalancer.
type LoadBalancerFallback struct {
	// After is how long the Service may wait for an address; 0 waits
	// forever.
	After time.Duration
	// Local says the infra cluster is the management cluster: the
	// Service's cluster IP reaches the control plane from Cluster API's
	// controllers and from the guests alike.
	Local bool
	// Now is the current time.
	Now time.Time
}

// FallbackEndpoint is the endpoint of a LoadBalancer Service that has had
// no address for fb.After, filling only what the user left empty: on the
// local infra cluster the Service's cluster IP and port, else a Ready
// infra node's address and the Service's node port (every LoadBalancer
// Service has both unless told otherwise). Before then, recheck is the
// time left; ok false with recheck 0 means there is no fallback, and why
// says why.
func FallbackEndpoint(kc *infrav1.KubevirtCluster, svc *corev1.Service, nodes []corev1.Node, fb LoadBalancerFallback) (ep infrav1.APIEndpoint, ok bool, recheck time.Duration, why string) {
	ep = kc.Spec.ControlPlaneEndpoint
	switch {
	case fb.After <= 0 || svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || ep.Host != "":
		return ep, false, 0, ""
	case fb.Now.Sub(svc.CreationTimestamp.Time) < fb.After:
		return ep, false, fb.After - fb.Now.Sub(svc.CreationTimestamp.Time), ""
	}
	if fb.Local {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return ep, false, 0, fmt.Sprintf("Service %s/%s has no cluster IP to fall back to", svc.Namespace, svc.Name)
		}
		ep.Host = svc.Spec.ClusterIP
		if ep.Port == 0 {
			ep.Port = Port(kc)
		}
		return ep, true, 0, fmt.Sprintf("no load balancer gave Service %s/%s an address in %s: the endpoint is its cluster IP, "+
			"reachable on this infra cluster (the management cluster) only", svc.Namespace, svc.Name, fb.After)
	}
	var nodePort int32
	if len(svc.Spec.Ports) > 0 {
		nodePort = svc.Spec.Ports[0].NodePort
	}
	switch {
	case ep.Port != 0:
		return ep, false, 0, "controlPlaneEndpoint.port is set, so its node port cannot be the endpoint's"
	case nodePort == 0:
		return ep, false, 0, fmt.Sprintf("Service %s/%s has no node port to fall back to", svc.Namespace, svc.Name)
	}
	if ep.Host = NodeAddress(nodes); ep.Host == "" {
		return ep, false, 0, "no Ready infra node has an address to fall back to"
	}
	ep.Port = nodePort
	return ep, true, 0, fmt.Sprintf("no load balancer gave Service %s/%s an address in %s: the endpoint is its node port %d on infra node address %s",
		svc.Namespace, svc.Name, fb.After, nodePort, ep.Host)
}

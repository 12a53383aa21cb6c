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

// Package controlplaneservice builds the Service in front of a tenant
// cluster's control-plane VMs and reads the control-plane endpoint from it.
// It is pure: objects in, objects out.
package controlplaneservice

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// Name is the name of a KubevirtCluster's control-plane Service, as the
// community provider names it.
func Name(kc *infrav1.KubevirtCluster) string { return kc.Name + "-lb" }

// Wanted reports whether the KubevirtCluster wants a Service at all.
func Wanted(kc *infrav1.KubevirtCluster) bool {
	return kc.Spec.ControlPlaneServiceTemplate.Spec.Type != infrav1.ServiceTypeNone
}

// Port is the Service port: the configured one, else the endpoint's (except
// for NodePort, where the endpoint port is the node port), else 6443.
func Port(kc *infrav1.KubevirtCluster) int32 {
	switch {
	case kc.Spec.ControlPlaneServiceTemplate.Spec.Port != 0:
		return kc.Spec.ControlPlaneServiceTemplate.Spec.Port
	case kc.Spec.ControlPlaneEndpoint.Port != 0 && !isNodePort(kc):
		// With NodePort, the endpoint port is the node port instead.
		return kc.Spec.ControlPlaneEndpoint.Port
	}
	return infrav1.DefaultAPIServerPort
}

func isNodePort(kc *infrav1.KubevirtCluster) bool {
	return kc.Spec.ControlPlaneServiceTemplate.Spec.Type == corev1.ServiceTypeNodePort
}

// Desired is the Service for a KubevirtCluster of Cluster clusterName, in
// namespace ns (the infra namespace unless the template names one). It
// selects only that cluster's control-plane virt-launcher pods, by the
// labels the VM builder puts on every VM's instance template.
func Desired(kc *infrav1.KubevirtCluster, clusterName, ns string) *corev1.Service {
	tmpl := kc.Spec.ControlPlaneServiceTemplate
	if tmpl.ObjectMeta.Namespace != "" {
		ns = tmpl.ObjectMeta.Namespace
	}
	svcType := tmpl.Spec.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	target := tmpl.Spec.TargetPort
	if target == 0 {
		target = infrav1.DefaultAPIServerPort
	}
	labels := maps.Clone(tmpl.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[infrav1.ClusterNameLabel] = clusterName
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(kc), Namespace: ns,
			Labels:      labels,
			Annotations: maps.Clone(tmpl.ObjectMeta.Annotations),
		},
		Spec: corev1.ServiceSpec{
			Type: svcType,
			Selector: merged(vmbuilder.ClusterSelector(clusterName, kc.Namespace),
				map[string]string{infrav1.RoleLabel: infrav1.RoleControlPlane}),
			Ports: []corev1.ServicePort{{
				Name: "api-server", Protocol: corev1.ProtocolTCP,
				Port: Port(kc), TargetPort: intstr.FromInt32(target),
				NodePort: nodePort(kc),
			}},
		},
	}
}

// nodePort is the node port a NodePort Service must use: the endpoint port,
// once set (by the user, or filled in from the first allocation).
func nodePort(kc *infrav1.KubevirtCluster) int32 {
	if isNodePort(kc) {
		return kc.Spec.ControlPlaneEndpoint.Port
	}
	return 0
}

// Drifted reports whether the live Service differs from the desired one in
// what the provider owns: type, selector, ports (ignoring node ports the API
// server assigned), and the template's labels and annotations. Fields others
// set (cluster IPs, finalizers of load balancer controllers, extra
// annotations) are not drift.
func Drifted(live, want *corev1.Service) bool {
	if live.Spec.Type != want.Spec.Type || !maps.Equal(live.Spec.Selector, want.Spec.Selector) || len(live.Spec.Ports) != len(want.Spec.Ports) {
		return true
	}
	for i, p := range want.Spec.Ports {
		l := live.Spec.Ports[i]
		if l.Name != p.Name || l.Protocol != p.Protocol || l.Port != p.Port || l.TargetPort != p.TargetPort ||
			p.NodePort != 0 && l.NodePort != p.NodePort {
			return true
		}
	}
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if live.Annotations[k] != v {
			return true
		}
	}
	return false
}

// Apply copies what the provider owns from want onto live, keeping what
// others set.
func Apply(live, want *corev1.Service) {
	live.Spec.Type = want.Spec.Type
	live.Spec.Selector = want.Spec.Selector
	ports := make([]corev1.ServicePort, len(want.Spec.Ports))
	copy(ports, want.Spec.Ports)
	for i := range ports {
		if ports[i].NodePort == 0 && i < len(live.Spec.Ports) && live.Spec.Ports[i].Port == ports[i].Port && want.Spec.Type != corev1.ServiceTypeClusterIP {
			ports[i].NodePort = live.Spec.Ports[i].NodePort
		}
	}
	live.Spec.Ports = ports
	if live.Labels == nil {
		live.Labels = map[string]string{}
	}
	maps.Copy(live.Labels, want.Labels)
	if len(want.Annotations) > 0 && live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	maps.Copy(live.Annotations, want.Annotations)
}

// Endpoint is the control-plane endpoint the Service gives, filling only what
// the user did not set in controlPlaneEndpoint: a LoadBalancer's ingress IP
// or hostname, else the ClusterIP (reachable from the management cluster
// when it is the infra cluster). A NodePort Service is reached on a node
// address: the user's, else one of the infra nodes' (NodeAddress). ok is
// false, with the reason in wait, while the address is not known yet.
func Endpoint(kc *infrav1.KubevirtCluster, svc *corev1.Service, nodes []corev1.Node) (ep infrav1.APIEndpoint, ok bool, wait string) {
	ep = kc.Spec.ControlPlaneEndpoint
	if ep.Port == 0 {
		ep.Port = Port(kc)
		if svc != nil && svc.Spec.Type == corev1.ServiceTypeNodePort && len(svc.Spec.Ports) > 0 && svc.Spec.Ports[0].NodePort != 0 {
			ep.Port = svc.Spec.Ports[0].NodePort
		}
	}
	if ep.Host != "" {
		return ep, true, ""
	}
	if svc == nil {
		return ep, false, "controlPlaneEndpoint.host must be set when no control-plane Service is created"
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		if ep.Host = IngressAddress(svc); ep.Host != "" {
			return ep, true, ""
		}
		return ep, false, fmt.Sprintf("waiting for a load balancer to give Service %s/%s an ingress address", svc.Namespace, svc.Name)
	case corev1.ServiceTypeNodePort:
		if ep.Host = NodeAddress(nodes); ep.Host == "" {
			return ep, false, fmt.Sprintf("no Ready infra node has an address to reach node port %d on: set controlPlaneEndpoint.host", ep.Port)
		}
		return ep, true, ""
	default:
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return ep, false, fmt.Sprintf("waiting for Service %s/%s to get a cluster IP", svc.Namespace, svc.Name)
		}
		ep.Host = svc.Spec.ClusterIP
		return ep, true, ""
	}
}

// IngressAddress is a LoadBalancer Service's first address, IP or host
// name; empty while it has none.
func IngressAddress(svc *corev1.Service) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
		if in.Hostname != "" {
			return in.Hostname
		}
	}
	return ""
}

// NeedsNodeAddress reports whether the endpoint is a NodePort Service's
// without a host, which the provider picks from the infra nodes.
func NeedsNodeAddress(kc *infrav1.KubevirtCluster) bool {
	return isNodePort(kc) && kc.Spec.ControlPlaneEndpoint.Host == ""
}

// NodeAddress picks the node address a NodePort endpoint without a host
// uses: of the Ready nodes, by name, the first one's external IP, else its
// internal IP. kube-proxy serves node ports on every node, so any one
// works; the choice is stable for the same nodes. Empty when no Ready node
// has an address.
func NodeAddress(nodes []corev1.Node) string {
	sorted := slices.SortedFunc(slices.Values(nodes), func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, n := range sorted {
			if !util.IsNodeReady(&n) || n.Spec.Unschedulable {
				continue
			}
			for _, a := range n.Status.Addresses {
				if a.Type == want && a.Address != "" {
					return a.Address
				}
			}
		}
	}
	return ""
}

func merged(a, b map[string]string) map[string]string {
	maps.Copy(a, b)
	return a
}

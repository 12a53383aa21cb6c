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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func cluster(mutate func(*infrav1.KubevirtCluster)) *infrav1.KubevirtCluster {
	kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "blue", Namespace: "tenants"}}
	if mutate != nil {
		mutate(kc)
	}
	return kc
}

func TestDesired(t *testing.T) {
	svc := Desired(cluster(func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Labels = map[string]string{"tenant": "blue"}
		kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Annotations = map[string]string{"metallb.universe.tf/address-pool": "tenants"}
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeLoadBalancer
		kc.Spec.ControlPlaneServiceTemplate.Spec.Port = 443
	}), "blue", "tenants")
	if svc.Name != "blue-lb" || svc.Namespace != "tenants" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("service %s/%s type %s", svc.Namespace, svc.Name, svc.Spec.Type)
	}
	if svc.Spec.Selector[infrav1.RoleLabel] != infrav1.RoleControlPlane || svc.Spec.Selector[infrav1.ClusterNameLabel] != "blue" ||
		svc.Spec.Selector[infrav1.KubevirtMachineNamespaceLabel] != "tenants" || len(svc.Spec.Selector) != 3 {
		t.Errorf("selector %v", svc.Spec.Selector)
	}
	if p := svc.Spec.Ports[0]; p.Port != 443 || p.TargetPort.IntVal != 6443 {
		t.Errorf("ports %+v", p)
	}
	if svc.Labels["tenant"] != "blue" || svc.Annotations["metallb.universe.tf/address-pool"] != "tenants" {
		t.Errorf("metadata %+v", svc.ObjectMeta)
	}
	other := Desired(cluster(func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneEndpoint.Port = 7443
		kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace = "lbs"
	}), "blue", "tenants")
	if other.Spec.Type != corev1.ServiceTypeClusterIP || other.Spec.Ports[0].Port != 7443 || other.Namespace != "lbs" {
		t.Errorf("defaults: %+v in %s", other.Spec, other.Namespace)
	}
}

func TestDriftAndApply(t *testing.T) {
	want := Desired(cluster(nil), "blue", "tenants")
	live := want.DeepCopy()
	live.Spec.ClusterIP = "10.96.0.10"
	live.Annotations = map[string]string{"someone": "else"}
	if Drifted(live, want) {
		t.Error("fields set by others are not drift")
	}
	live.Spec.Selector = map[string]string{"app": "anything"}
	live.Spec.Ports[0].Port = 80
	if !Drifted(live, want) {
		t.Fatal("a changed selector and port are drift")
	}
	Apply(live, want)
	if Drifted(live, want) || live.Spec.ClusterIP != "10.96.0.10" || live.Annotations["someone"] != "else" {
		t.Errorf("after Apply: %+v", live)
	}
}

// TestNodePortStable checks that once the endpoint carries the node port,
// the Service keeps its port and that node port: no drift, no new
// allocation.
func TestNodePortStable(t *testing.T) {
	kc := cluster(func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeNodePort
	})
	first := Desired(kc, "blue", "tenants")
	if first.Spec.Ports[0].Port != 6443 || first.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("first ports %+v", first.Spec.Ports)
	}
	live := first.DeepCopy()
	live.Spec.Ports[0].NodePort = 31234
	ep, ok, _ := Endpoint(kc, live, nil)
	if ok || ep.Port != 31234 {
		t.Fatalf("endpoint %+v ok %v: the node port is the endpoint port, the host is the user's", ep, ok)
	}
	kc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "node.example", Port: ep.Port}
	want := Desired(kc, "blue", "tenants")
	if want.Spec.Ports[0].Port != 6443 || want.Spec.Ports[0].NodePort != 31234 || Drifted(live, want) {
		t.Errorf("after the endpoint is set: ports %+v, drifted %v", want.Spec.Ports, Drifted(live, want))
	}
	live.Spec.Ports[0].NodePort = 30000
	if !Drifted(live, want) {
		t.Error("a changed node port is drift")
	}
	Apply(live, want)
	if live.Spec.Ports[0].NodePort != 31234 {
		t.Errorf("node port %d after Apply", live.Spec.Ports[0].NodePort)
	}
}

func TestNodeAddress(t *testing.T) {
	node := func(name string, ready, unschedulable bool, addrs ...corev1.NodeAddress) corev1.Node {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Addresses: addrs, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	}
	internal := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
	}
	external := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
	}
	tests := []struct {
		name  string
		nodes []corev1.Node
		want  string
	}{
		{"none", nil, ""},
		{"first by name", []corev1.Node{node("b", true, false, internal("10.0.0.2")), node("a", true, false, internal("10.0.0.1"))}, "10.0.0.1"},
		{"not ready skipped", []corev1.Node{node("a", false, false, internal("10.0.0.1")), node("b", true, false, internal("10.0.0.2"))}, "10.0.0.2"},
		{"cordoned skipped", []corev1.Node{node("a", true, true, internal("10.0.0.1")), node("b", true, false, internal("10.0.0.2"))}, "10.0.0.2"},
		{"external preferred", []corev1.Node{node("a", true, false, internal("10.0.0.1")), node("b", true, false, internal("10.0.0.2"), external("192.0.2.2"))}, "192.0.2.2"},
		{"no address", []corev1.Node{node("a", true, false)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeAddress(tt.nodes); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	lb := func(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		s := Desired(cluster(nil), "blue", "tenants")
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = ingress
		return s
	}
	clusterIP := Desired(cluster(nil), "blue", "tenants")
	clusterIP.Spec.ClusterIP = "10.96.0.10"
	nodePort := Desired(cluster(nil), "blue", "tenants")
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	nodePort.Spec.Ports[0].NodePort = 31443
	tests := []struct {
		name     string
		endpoint infrav1.APIEndpoint
		svc      *corev1.Service
		want     infrav1.APIEndpoint
		ok       bool
		wait     string
	}{
		{"cluster IP", infrav1.APIEndpoint{}, clusterIP, infrav1.APIEndpoint{Host: "10.96.0.10", Port: 6443}, true, ""},
		{"load balancer IP", infrav1.APIEndpoint{}, lb(corev1.LoadBalancerIngress{IP: "192.0.2.10"}), infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443}, true, ""},
		{"load balancer hostname", infrav1.APIEndpoint{}, lb(corev1.LoadBalancerIngress{Hostname: "blue.lb.example"}), infrav1.APIEndpoint{Host: "blue.lb.example", Port: 6443}, true, ""},
		{"load balancer pending", infrav1.APIEndpoint{}, lb(), infrav1.APIEndpoint{Port: 6443}, false, "ingress address"},
		{"user host kept", infrav1.APIEndpoint{Host: "api.blue.example"}, lb(corev1.LoadBalancerIngress{IP: "192.0.2.10"}), infrav1.APIEndpoint{Host: "api.blue.example", Port: 6443}, true, ""},
		{"user port kept", infrav1.APIEndpoint{Port: 7443}, lb(corev1.LoadBalancerIngress{IP: "192.0.2.10"}), infrav1.APIEndpoint{Host: "192.0.2.10", Port: 7443}, true, ""},
		{"user host and port", infrav1.APIEndpoint{Host: "api.blue.example", Port: 443}, nil, infrav1.APIEndpoint{Host: "api.blue.example", Port: 443}, true, ""},
		{"no service, no host", infrav1.APIEndpoint{}, nil, infrav1.APIEndpoint{Port: 6443}, false, "must be set"},
		{"node port without a Ready node", infrav1.APIEndpoint{}, nodePort, infrav1.APIEndpoint{Port: 31443}, false, "no Ready infra node"},
		{"node port with host", infrav1.APIEndpoint{Host: "192.0.2.1"}, nodePort, infrav1.APIEndpoint{Host: "192.0.2.1", Port: 31443}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := cluster(func(kc *infrav1.KubevirtCluster) { kc.Spec.ControlPlaneEndpoint = tt.endpoint })
			got, ok, wait := Endpoint(kc, tt.svc, nil)
			if got != tt.want || ok != tt.ok || !strings.Contains(wait, tt.wait) {
				t.Errorf("got %+v %v %q, want %+v %v %q", got, ok, wait, tt.want, tt.ok, tt.wait)
			}
		})
	}
}

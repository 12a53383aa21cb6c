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
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestFallbackEndpoint(t *testing.T) {
	created := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	lb := func(clusterIP string, nodePort int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "blue-lb", CreationTimestamp: metav1.NewTime(created)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: clusterIP,
				Ports: []corev1.ServicePort{{Port: 6443, NodePort: nodePort}}}}
	}
	kc := func(svcType corev1.ServiceType, ep infrav1.APIEndpoint) *infrav1.KubevirtCluster {
		k := &infrav1.KubevirtCluster{}
		k.Spec.ControlPlaneServiceTemplate.Spec.Type = svcType
		k.Spec.ControlPlaneEndpoint = ep
		return k
	}
	ready := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	local := LoadBalancerFallback{After: 2 * time.Minute, Local: true, Now: created.Add(3 * time.Minute)}
	external := local
	external.Local = false
	early := local
	early.Now = created.Add(30 * time.Second)
	never := local
	never.After = 0
	tests := []struct {
		name    string
		kc      *infrav1.KubevirtCluster
		svc     *corev1.Service
		nodes   []corev1.Node
		fb      LoadBalancerFallback
		want    string // host:port when ok
		recheck time.Duration
		why     string
	}{
		{"local: the cluster IP", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 30443), nil, local, "10.96.0.20:6443", 0, "its cluster IP"},
		{"local: the user's port kept", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{Port: 443}), lb("10.96.0.20", 30443), nil, local, "10.96.0.20:443", 0, "its cluster IP"},
		{"external: a node port", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 30443), []corev1.Node{ready}, external, "192.0.2.10:30443", 0, "node port 30443 on infra node address 192.0.2.10"},
		{"external: no node", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 30443), nil, external, "", 0, "no Ready infra node"},
		{"external: no node port", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 0), []corev1.Node{ready}, external, "", 0, "no node port"},
		{"external: the user's port", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{Port: 443}), lb("10.96.0.20", 30443), []corev1.Node{ready}, external, "", 0, "controlPlaneEndpoint.port is set"},
		{"too early", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 30443), nil, early, "", 90 * time.Second, ""},
		{"never", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{}), lb("10.96.0.20", 30443), nil, never, "", 0, ""},
		{"the user's host", kc(corev1.ServiceTypeLoadBalancer, infrav1.APIEndpoint{Host: "api.example.com"}), lb("10.96.0.20", 30443), nil, local, "", 0, ""},
		{"not a load balancer", kc(corev1.ServiceTypeNodePort, infrav1.APIEndpoint{}), &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}, nil, local, "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, ok, recheck, why := FallbackEndpoint(tt.kc, tt.svc, tt.nodes, tt.fb)
			got := ""
			if ok {
				got = ep.Host + ":" + strconv.Itoa(int(ep.Port))
			}
			if got != tt.want || recheck != tt.recheck || !strings.Contains(why, tt.why) || (tt.why == "") != (why == "") {
				t.Errorf("got %q, recheck %s, why %q; want %q, %s, %q", got, recheck, why, tt.want, tt.recheck, tt.why)
			}
		})
	}
}

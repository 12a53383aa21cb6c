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

package machine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestApplyInfraLabels(t *testing.T) {
	keys := InfraNodeLabelKeys([]string{"rack", corev1.LabelTopologyZone})
	if want := []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, "rack"}; !equality.Semantic.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	node := func(labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
	}
	zone, region := corev1.LabelTopologyZone, corev1.LabelTopologyRegion
	tests := []struct {
		name        string
		tenant      *corev1.Node
		infra       *corev1.Node
		labels      map[string]string
		annotations map[string]string
	}{
		{"copies zone, region and the extra key; other labels stay",
			node(map[string]string{"app": "x"}, nil),
			node(map[string]string{zone: "z1", region: "r1", "rack": "r7", "other": "no"}, nil),
			map[string]string{"app": "x", zone: "z1", region: "r1", "rack": "r7"},
			map[string]string{InfraLabelsAnnotation: zone + "," + region + ",rack"}},
		{"a move to another zone updates the label",
			node(map[string]string{zone: "z1"}, map[string]string{InfraLabelsAnnotation: zone}),
			node(map[string]string{zone: "z2"}, nil),
			map[string]string{zone: "z2"}, map[string]string{InfraLabelsAnnotation: zone}},
		{"a key the infra node lost is removed only if we set it",
			node(map[string]string{zone: "z1", "rack": "r7", region: "mine"}, map[string]string{InfraLabelsAnnotation: zone + ",rack"}),
			node(map[string]string{zone: "z1"}, nil),
			map[string]string{zone: "z1", region: "mine"}, map[string]string{InfraLabelsAnnotation: zone}},
		{"an infra node without placement labels leaves the tenant's own; the annotation says it was synced",
			node(map[string]string{zone: "tenant-set"}, nil), node(nil, nil),
			map[string]string{zone: "tenant-set"}, map[string]string{InfraLabelsAnnotation: ""}},
		{"a label the kubelet set with another value is not taken over",
			node(map[string]string{zone: "kubelet-set"}, nil), node(map[string]string{zone: "z1", region: "r1"}, nil),
			map[string]string{zone: "kubelet-set", region: "r1"}, map[string]string{InfraLabelsAnnotation: region}},
		{"an infra node that cannot be read removes what was copied",
			node(map[string]string{zone: "z1", "app": "x"}, map[string]string{InfraLabelsAnnotation: zone}), nil,
			map[string]string{"app": "x"}, map[string]string{InfraLabelsAnnotation: ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			applyInfraLabels(tc.tenant, tc.infra, keys)
			if !equality.Semantic.DeepEqual(tc.tenant.Labels, tc.labels) {
				t.Errorf("labels = %v, want %v", tc.tenant.Labels, tc.labels)
			}
			if !equality.Semantic.DeepEqual(tc.tenant.Annotations, tc.annotations) {
				t.Errorf("annotations = %v, want %v", tc.tenant.Annotations, tc.annotations)
			}
		})
	}
}

// hugepages2Mi is the node resource of 2Mi hugepages.
const hugepages2Mi corev1.ResourceName = corev1.ResourceHugePagesPrefix + "2Mi"

func TestPerformanceUnsupported(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	withHugepages := *ready.DeepCopy()
	withHugepages.Allocatable = corev1.ResourceList{hugepages2Mi: resource.MustParse("1Gi")}
	cpuManager := map[string]string{"kubevirt.io/cpumanager": "true"}
	tests := []struct {
		name  string
		nodes []corev1.Node
		want  string
	}{
		{"a node with both", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: cpuManager}, Status: withHugepages}}, ""},
		{"neither", []corev1.Node{{Status: ready}}, "no Ready infra node has the CPU manager (label kubevirt.io/cpumanager=true or cpumanager=true) or hugepages-2Mi"},
		{"KubeVirt 1.7's CPU manager label", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cpumanager": "true"}}, Status: withHugepages}}, ""},
		{"no CPU manager", []corev1.Node{{Status: withHugepages}}, "needs dedicated CPUs, but no Ready infra node has the CPU manager"},
		{"no hugepages", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: cpuManager}, Status: ready}}, "needs hugepages, but no Ready infra node offers hugepages-2Mi"},
		{"each on a different node", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: cpuManager}, Status: ready}, {Status: withHugepages}},
			"on one node, but the 1 Ready infra nodes with the CPU manager have no hugepages-2Mi"},
		{"the only capable node is marked unschedulable by KubeVirt", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			"kubevirt.io/cpumanager": "true", "kubevirt.io/schedulable": "false"}}, Status: withHugepages}}, "no Ready infra node has the CPU manager"},
		{"the only capable node is not Ready", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: cpuManager}, Status: corev1.NodeStatus{
			Allocatable: withHugepages.Allocatable}}}, "no Ready infra node has the CPU manager"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := performanceUnsupported(tc.nodes, hugepages2Mi)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestValidateInfraNodeLabelKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"topology.kubernetes.io/zone":          true,
		"rack.example.com/name":                true,
		"rack":                                 true,
		"kubernetes.io/hostname":               false,
		"kubernetes.io/arch":                   false,
		"node-role.kubernetes.io/worker":       false,
		"foo.node-restriction.kubernetes.io/x": false,
		"node.cluster.x-k8s.io/pool":           false,
		"team.node.cluster.x-k8s.io/pool":      false,
		"bad key":                              false,
	} {
		if err := ValidateInfraNodeLabelKey(key); (err == nil) != ok {
			t.Errorf("%q: err = %v, want ok=%v", key, err, ok)
		}
	}
}

func TestNUMAAllowed(t *testing.T) {
	kv := func(version string, gates ...string) kubevirtv1.KubeVirt {
		k := kubevirtv1.KubeVirt{Status: kubevirtv1.KubeVirtStatus{ObservedKubeVirtVersion: version}}
		if gates != nil {
			k.Spec.Configuration.DeveloperConfiguration = &kubevirtv1.DeveloperConfiguration{FeatureGates: gates}
		}
		return k
	}
	for name, tc := range map[string]struct {
		kv   kubevirtv1.KubeVirt
		want bool
	}{
		"1.3 without the gate":   {kv("v1.3.1"), false},
		"1.3 with the gate":      {kv("v1.3.1", "NUMA"), true},
		"1.4, generally allowed": {kv("v1.4.0"), true},
		"1.7":                    {kv("v1.7.0"), true},
		"unknown version":        {kv(""), false},
	} {
		if got := numaAllowed(tc.kv); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

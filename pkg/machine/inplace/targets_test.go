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

package inplace

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestNoOtherNode(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	node := func(name, z string, change ...func(*corev1.Node)) corev1.Node {
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zone: z, kubevirtv1.NodeSchedulable: "true"}},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
		for _, c := range change {
			c(&n)
		}
		return n
	}
	inZoneA := func(vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
	}
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	}
	for _, tt := range []struct {
		name   string
		vmi    func(*kubevirtv1.VirtualMachineInstance)
		nodes  []corev1.Node
		target bool
	}{
		{"another node anywhere", nil, []corev1.Node{node("a1", "a"), node("b1", "b")}, true},
		{"the VM's own node alone", nil, []corev1.Node{node("a1", "a")}, false},
		{"pinned to a zone of one node", inZoneA, []corev1.Node{node("a1", "a"), node("b1", "b"), node("c1", "c")}, false},
		{"pinned to a zone of two nodes", inZoneA, []corev1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")}, true},
		{"a node selector of another zone", func(vmi *kubevirtv1.VirtualMachineInstance) { vmi.Spec.NodeSelector = map[string]string{zone: "a"} },
			[]corev1.Node{node("a1", "a"), node("b1", "b")}, false},
		{"the other node cordoned", nil, []corev1.Node{node("a1", "a"), node("a2", "a", func(n *corev1.Node) { n.Spec.Unschedulable = true })}, false},
		{"the other node not Ready", nil, []corev1.Node{node("a1", "a"), node("a2", "a", func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		})}, false},
		{"the other node not schedulable for KubeVirt", nil, []corev1.Node{node("a1", "a"), node("a2", "a", func(n *corev1.Node) {
			n.Labels[kubevirtv1.NodeSchedulable] = "false"
		})}, false},
		{"the other node tainted", nil, []corev1.Node{node("a1", "a"), node("a2", "a", tainted)}, false},
		{"the taint tolerated", func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
		}, []corev1.Node{node("a1", "a"), node("a2", "a", tainted)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{NodeName: "a1"}}
			if tt.vmi != nil {
				tt.vmi(vmi)
			}
			why := NoOtherNode(vmi, tt.nodes)
			if tt.target {
				g.Expect(why).To(BeEmpty())
				return
			}
			g.Expect(why).To(HavePrefix("no infra node but a1 can take the VM, so the live migration would never start: none of the %d others is Ready,", len(tt.nodes)-1))
		})
	}
}

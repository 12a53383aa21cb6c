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

package failuredomains

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func node(zone string, ready corev1.ConditionStatus, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func TestStatusDiscoversZones(t *testing.T) {
	unreachable := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	gpu := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	preferNot := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "busy", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  map[string]bool
	}{
		{"a zone takes control planes only with a usable node", []corev1.Node{
			node("zone-b", corev1.ConditionTrue),
			node("zone-a", corev1.ConditionUnknown, unreachable),
			node("zone-c", corev1.ConditionTrue, cordoned),
			node("zone-b", corev1.ConditionFalse),
			node("", corev1.ConditionTrue),
		}, map[string]bool{"zone-a": false, "zone-b": true, "zone-c": false}},
		{"a zone of tainted nodes only takes no control plane; a soft taint keeps none off", []corev1.Node{
			node("zone-a", corev1.ConditionTrue),
			node("zone-gpu", corev1.ConditionTrue, gpu),
			node("zone-b", corev1.ConditionTrue, gpu),
			node("zone-b", corev1.ConditionTrue, preferNot),
		}, map[string]bool{"zone-a": true, "zone-b": true, "zone-gpu": false}},
		{"when every zone is tainted, the control plane tolerates the taints", []corev1.Node{
			node("zone-a", corev1.ConditionTrue, gpu),
			node("zone-b", corev1.ConditionTrue, gpu, cordoned),
		}, map[string]bool{"zone-a": true, "zone-b": false}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDomains(t, Status(nil, tc.nodes), tc.want) })
	}
}

func checkDomains(t *testing.T, got []clusterv1.FailureDomain, want map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d failure domains, want %d: %+v", len(got), len(want), got)
	}
	for i, fd := range got {
		if i > 0 && got[i-1].Name >= fd.Name {
			t.Errorf("not sorted: %+v", got)
		}
		if cp, ok := want[fd.Name]; !ok || ptr.Deref(fd.ControlPlane, !cp) != cp {
			t.Errorf("%s: controlPlane %v, want %v", fd.Name, ptr.Deref(fd.ControlPlane, false), cp)
		}
	}
}

func TestStatusKeepsExplicitDomains(t *testing.T) {
	got := Status([]infrav1.FailureDomainSpec{{Name: "rack-1"}, {Name: "rack-0", ControlPlane: ptr.To(false)}}, nil)
	if len(got) != 2 || got[0].Name != "rack-0" || *got[0].ControlPlane || !*got[1].ControlPlane {
		t.Errorf("got %+v", got)
	}
}

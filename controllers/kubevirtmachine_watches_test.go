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

package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestMachineChangedForInfra(t *testing.T) {
	base := func() *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 1,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}}
		m.Status.Conditions = []metav1.Condition{{Type: "InfrastructureReady", Status: metav1.ConditionFalse, Reason: "Waiting"}}
		return m
	}
	for name, tc := range map[string]struct {
		change func(*clusterv1.Machine)
		want   bool
	}{
		"its status conditions echo the KubevirtMachine's": {func(m *clusterv1.Machine) {
			m.Status.Conditions[0].Status = metav1.ConditionTrue
			m.Status.Phase = "Provisioned"
		}, false},
		"nothing": {func(*clusterv1.Machine) {}, false},
		"its bootstrap data is named (a spec change)": {func(m *clusterv1.Machine) {
			m.Spec.Bootstrap.DataSecretName = ptr.To("m-bootstrap")
			m.Generation = 2
		}, true},
		"a label":       {func(m *clusterv1.Machine) { m.Labels["x"] = "y" }, true},
		"an annotation": {func(m *clusterv1.Machine) { m.Annotations["c"] = "e" }, true},
		"its nodeRef":   {func(m *clusterv1.Machine) { m.Status.NodeRef.Name = "node-0" }, true},
		"being deleted": {func(m *clusterv1.Machine) { m.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
	} {
		t.Run(name, func(t *testing.T) {
			newMachine := base()
			tc.change(newMachine)
			if got := machineChangedForInfra.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: newMachine}); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if !machineChangedForInfra.Create(event.CreateEvent{Object: base()}) || !machineChangedForInfra.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a Machine's creation and deletion must pass")
	}
}

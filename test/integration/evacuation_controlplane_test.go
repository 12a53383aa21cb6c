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

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// holdFinalizer keeps a deleted Machine around, as Cluster API's own
// finalizer does while it drains and removes the etcd member.
const holdFinalizer = "test.capkv.io/hold"

// TestControlPlaneEvacuatesOneMachineAtATime drains the infra node under
// two control-plane VMs with External eviction and the ReplaceMachine
// action. While a third member is unhealthy neither moves; then one at a
// time: the second waits while the first Machine is being deleted and
// while its replacement is not healthy yet, so the control plane never
// loses two members at once.
func TestControlPlaneEvacuatesOneMachineAtATime(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	pinned := func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategyExternal)
		spec.NodeSelector = map[string]string{corev1.LabelHostname: "infra-a"}
		km.Spec.Evacuation.Action = infrav1.EvacuationReplaceMachine
	}
	names := []string{"cp-0", "cp-1"}
	kms := map[string]*infrav1.KubevirtMachine{}
	for _, name := range names {
		kms[name] = tc.newMachine(t, fixture.MachineOptions{Name: name, ControlPlane: true, Mutate: pinned})
	}
	t.Cleanup(func() {
		for _, name := range names {
			_ = holdMachine(tc, name, false)
		}
	})
	for _, name := range names {
		eventually(t, tc.provisioned(kms[name])).Should(Succeed())
		g.Expect(holdMachine(tc, name, true)).To(Succeed())
		setNodeHealthy(t, tc, name, true)
	}
	// A third member, on another infra node, whose Node is not healthy.
	g.Expect(newControlPlaneMachine(tc, "cp-2")).To(Succeed())

	drained := drainInfraNode(t, "infra-a")
	g.Expect(drained()).NotTo(Succeed(), "the first round of evictions starts both evacuations")
	for _, name := range names {
		eventually(t, tc.reason(kms[name], infrav1.EvacuatingCondition)).Should(Equal(infrav1.WaitingForControlPlaneTurnReason))
		g.Expect(condition(get(t, tc.c, kms[name]), infrav1.EvacuatingCondition)).To(ContainSubstring("machine cp-2 (not healthy yet)"))
	}
	g.Consistently(evacuating(tc, names)).WithTimeout(3 * time.Second).Should(BeEmpty())

	// cp-2 is healthy: one of the two goes, the other keeps waiting while
	// the first Machine is being deleted.
	setNodeHealthy(t, tc, "cp-2", true)
	eventually(t, evacuating(tc, names)).Should(HaveLen(1))
	first := evacuating(tc, names)()[0]
	second := names[0]
	if first == names[0] {
		second = names[1]
	}
	g.Expect(tc.reason(kms[first], infrav1.EvacuatingCondition)()).To(Equal(infrav1.ReplacingMachineReason))
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: tc.ns}}
	eventually(t, func() bool { return !get(t, tc.c, machine).DeletionTimestamp.IsZero() }).Should(BeTrue())
	g.Consistently(evacuating(tc, names)).WithTimeout(3 * time.Second).Should(Equal([]string{first}))
	g.Expect(tc.reason(kms[second], infrav1.EvacuatingCondition)()).To(Equal(infrav1.WaitingForControlPlaneTurnReason))

	// KubeadmControlPlane creates a replacement, which joins; then lets
	// the old Machine go.
	g.Expect(newControlPlaneMachine(tc, "cp-3")).To(Succeed())
	g.Expect(holdMachine(tc, first, false)).To(Succeed())
	eventually(t, func() string { return condition(get(t, tc.c, kms[second]), infrav1.EvacuatingCondition) }).
		Should(ContainSubstring("machine cp-3 (not healthy yet)"))
	g.Consistently(tc.reason(kms[second], infrav1.EvacuatingCondition)).WithTimeout(3 * time.Second).
		Should(Equal(infrav1.WaitingForControlPlaneTurnReason))

	setNodeHealthy(t, tc, "cp-3", true)
	eventually(t, tc.reason(kms[second], infrav1.EvacuatingCondition)).Should(Equal(infrav1.ReplacingMachineReason))
	g.Expect(holdMachine(tc, second, false)).To(Succeed())
	eventually(t, drained).Should(Succeed())
	g.Expect(machineEvents(t, tc, kms[second])).To(ContainElements(infrav1.WaitingForControlPlaneTurnReason, infrav1.ReplacingMachineReason))
}

// evacuating polls which of the named machines are past waiting for
// their turn: evacuating, or already deleted for it.
func evacuating(tc *tenantCluster, names []string) func() []string {
	return func() []string {
		var moving []string
		for _, name := range names {
			km := &infrav1.KubevirtMachine{}
			err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: name}, km)
			if client.IgnoreNotFound(err) != nil {
				return []string{err.Error()}
			}
			if err != nil || conditions.GetReason(km, infrav1.EvacuatingCondition) == infrav1.ReplacingMachineReason {
				moving = append(moving, name)
			}
		}
		return moving
	}
}

// holdMachine adds or removes the test's finalizer on a Machine.
func holdMachine(tc *tenantCluster, name string, hold bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &clusterv1.Machine{}
		if err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: name}, m); err != nil {
			return client.IgnoreNotFound(err)
		}
		if hold == controllerutil.ContainsFinalizer(m, holdFinalizer) {
			return nil
		}
		if hold {
			controllerutil.AddFinalizer(m, holdFinalizer)
		} else {
			controllerutil.RemoveFinalizer(m, holdFinalizer)
		}
		return tc.c.Update(context.Background(), m)
	})
}

// setNodeHealthy plays Cluster API's Machine controller reporting the
// Machine's Node healthy or not.
func setNodeHealthy(t *testing.T, tc *tenantCluster, name string, healthy bool) {
	t.Helper()
	status, reason := metav1.ConditionFalse, clusterv1.MachineNodeNotHealthyReason
	if healthy {
		status, reason = metav1.ConditionTrue, clusterv1.MachineNodeHealthyReason
	}
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &clusterv1.Machine{}
		if err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: name}, m); err != nil {
			return err
		}
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineNodeHealthyCondition, Status: status, Reason: reason})
		return tc.c.Status().Update(context.Background(), m)
	})).To(Succeed())
}

// newControlPlaneMachine creates a control-plane Machine whose
// KubevirtMachine does not matter here (a member elsewhere, or a
// replacement still joining): it has no NodeHealthy condition yet.
func newControlPlaneMachine(tc *tenantCluster, name string) error {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.ns, Labels: map[string]string{
			clusterv1.ClusterNameLabel: fixture.ClusterName, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: fixture.ClusterName, Version: "v1.34.1",
			Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtMachine", Name: name}},
	}
	if err := tc.c.Create(context.Background(), m); err != nil {
		return fmt.Errorf("creating Machine %s: %w", name, err)
	}
	return nil
}

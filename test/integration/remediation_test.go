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
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestRemediationRestartsTheVMThenHandsOver plays a MachineHealthCheck
// with external remediation: it creates a KubevirtRemediation named after
// an unhealthy Machine and owned by it, and never deletes it (the Machine
// stays unhealthy). The provider restarts the VM (a new instance, the same
// Machine), again after the timeout, and after the retry limit hands the
// Machine back to its owner through the OwnerRemediated condition.
func TestRemediationRestartsTheVMThenHandsOver(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "rem-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	first := instanceUID(t, tc, km.Name)()
	machine := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: km.Name, Namespace: tc.ns}})

	// The timeout leaves room to read the first restart before the second:
	// a new instance alone can take a few seconds.
	rem := tc.newRemediation(t, machine, infrav1.KubevirtRemediationSpec{RetryLimit: 2, TimeoutSeconds: 6})
	eventually(t, retryCount(tc, rem)).Should(Equal("Waiting/1"))
	cur := get(t, tc.c, rem)
	g.Expect(remediationCondition(cur)).To(HavePrefix("True/" + infrav1.RestartedVirtualMachineReason + ": restart 1 of 2"))
	// The Machine tells too, as the MachineHealthCheck leaves it to the
	// remediation; it is not handed back yet.
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: km.Name, Namespace: tc.ns}})
	g.Expect(conditions.GetReason(m, clusterv1.MachineExternallyRemediatedCondition)).To(Equal(infrav1.RestartedVirtualMachineReason))
	g.Expect(conditions.Has(m, clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse())
	restarted := get(t, tc.c, km)
	g.Expect(restarted.Annotations).To(HaveKeyWithValue(infrav1.RestartRequestedAnnotation, cur.Status.LastRemediated.UTC().Format(time.RFC3339)))
	eventually(t, func() string { return get(t, tc.c, km).Status.LastRestartRequest }).
		Should(Equal(restarted.Annotations[infrav1.RestartRequestedAnnotation]))
	eventually(t, instanceUID(t, tc, km.Name)).ShouldNot(Or(Equal(first), BeEmpty()))
	second := instanceUID(t, tc, km.Name)()

	// Still unhealthy after the timeout: a second restart.
	eventually(t, retryCount(tc, rem)).Should(Equal("Waiting/2"))
	g.Expect(remediationCondition(get(t, tc.c, rem))).To(ContainSubstring("restart 2 of 2"))
	eventually(t, instanceUID(t, tc, km.Name)).ShouldNot(Or(Equal(first), Equal(second), BeEmpty()))

	// And after the second timeout the Machine goes back to its owner.
	eventually(t, retryCount(tc, rem)).Should(Equal("Failed/2"))
	cur = get(t, tc.c, rem)
	g.Expect(remediationCondition(cur)).To(HavePrefix("False/" + infrav1.RetryLimitReachedReason + ": 2 restart(s) of the VM did not make Machine rem-0 healthy"))
	handedOver(t, tc, machine, infrav1.RetryLimitReachedReason)
	eventually(t, remediationEvents(t, tc, rem)).Should(Equal([]string{
		infrav1.RestartedVirtualMachineReason, infrav1.RestartedVirtualMachineReason, infrav1.RetryLimitReachedReason}))
	eventually(t, func() []string { return machineEvents(t, tc, km) }).Should(ContainElement("VirtualMachineRestarted"))

	// Nothing more happens: no third restart, the Machine stays (its owner
	// would delete it).
	last := instanceUID(t, tc, km.Name)()
	NewWithT(t).Consistently(func() string { return instanceUID(t, tc, km.Name)() + " " + retryCount(tc, rem)() }).
		WithTimeout(3 * time.Second).Should(Equal(last + " Failed/2"))
	g.Expect(get(t, tc.c, machine).UID).To(Equal(machine.UID))
	g.Expect(get(t, tc.c, machine).DeletionTimestamp.IsZero()).To(BeTrue())
}

// TestRemediationOfAVMThatWouldNotRestart remediates a machine whose VM
// has runStrategy RerunOnFailure: deleting its instance would leave it
// stopped, so the provider does not restart it and hands the Machine back
// at once.
func TestRemediationOfAVMThatWouldNotRestart(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "rem-rerun-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.VirtualMachineTemplate.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyRerunOnFailure)
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	first := instanceUID(t, tc, km.Name)()
	machine := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: km.Name, Namespace: tc.ns}})

	rem := tc.newRemediation(t, machine, infrav1.KubevirtRemediationSpec{RetryLimit: 3, TimeoutSeconds: 60})
	eventually(t, retryCount(tc, rem)).Should(Equal("Failed/0"))
	g.Expect(remediationCondition(get(t, tc.c, rem))).To(HavePrefix("False/" + infrav1.NotRestartableReason + ": the VirtualMachine of KubevirtMachine rem-rerun-0 has runStrategy RerunOnFailure"))
	handedOver(t, tc, machine, infrav1.NotRestartableReason)
	eventually(t, remediationEvents(t, tc, rem)).Should(Equal([]string{infrav1.NotRestartableReason}))
	g.Expect(get(t, tc.c, km).Annotations).NotTo(HaveKey(infrav1.RestartRequestedAnnotation))
	g.Expect(instanceUID(t, tc, km.Name)()).To(Equal(first))
}

// TestRemediationWaitsForItsMachine creates the remediation before its
// Machine and KubevirtMachine exist: it waits, restarting nothing, and
// requests the restart once they appear.
func TestRemediationWaitsForItsMachine(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	rem := &infrav1.KubevirtRemediation{ObjectMeta: metav1.ObjectMeta{Name: "rem-late-0", Namespace: tc.ns,
		Labels: map[string]string{clusterv1.ClusterNameLabel: fixture.ClusterName}}}
	g.Expect(tc.c.Create(context.Background(), rem)).To(Succeed())
	deleteAtEnd(t, tc, rem)
	g.Expect(rem.Spec).To(Equal(infrav1.KubevirtRemediationSpec{RetryLimit: 1, TimeoutSeconds: 300}), "the API server's defaults")
	eventually(t, retryCount(tc, rem)).Should(Equal("Remediating/0"))
	g.Expect(remediationCondition(get(t, tc.c, rem))).To(Equal("False/" + infrav1.WaitingForMachineReason + ": Machine rem-late-0 does not exist; nothing restarted yet"))

	km := tc.newMachine(t, fixture.MachineOptions{Name: rem.Name})
	eventually(t, retryCount(tc, rem)).Should(Equal("Waiting/1"))
	g.Expect(get(t, tc.c, km).Annotations).To(HaveKey(infrav1.RestartRequestedAnnotation))
}

// newRemediation creates the KubevirtRemediation a MachineHealthCheck
// creates for an unhealthy Machine: named after it, owned by it, labelled
// with its cluster.
func (tc *tenantCluster) newRemediation(t *testing.T, m *clusterv1.Machine, spec infrav1.KubevirtRemediationSpec) *infrav1.KubevirtRemediation {
	t.Helper()
	rem := &infrav1.KubevirtRemediation{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: m.Spec.ClusterName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: spec,
	}
	NewWithT(t).Expect(tc.c.Create(context.Background(), rem)).To(Succeed())
	deleteAtEnd(t, tc, rem)
	return rem
}

// deleteAtEnd deletes a remediation when the test ends, as the
// MachineHealthCheck does once the Machine is healthy, so that it does not
// act again while later tests count the provider's writes.
func deleteAtEnd(t *testing.T, tc *tenantCluster, rem *infrav1.KubevirtRemediation) {
	t.Cleanup(func() {
		NewWithT(t).Expect(client.IgnoreNotFound(tc.c.Delete(context.Background(), rem))).To(Succeed())
	})
}

// retryCount polls "phase/retryCount" of a remediation.
func retryCount(tc *tenantCluster, rem *infrav1.KubevirtRemediation) func() string {
	return func() string {
		cur := &infrav1.KubevirtRemediation{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(rem), cur); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s/%d", cur.Status.Phase, cur.Status.RetryCount)
	}
}

// remediationCondition is "Status/Reason: message" of the Remediating
// condition.
func remediationCondition(rem *infrav1.KubevirtRemediation) string {
	c := conditions.Get(rem, infrav1.RemediatingCondition)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// instanceUID polls the UID of a VM's running instance; empty while it
// has none running.
func instanceUID(t *testing.T, tc *tenantCluster, name string) func() string {
	return func() string {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := infraGet(t, w.Env.Client, tc.ns, name, vmi); err != nil || vmi.Status.Phase != kubevirtv1.Running || !vmi.DeletionTimestamp.IsZero() {
			return ""
		}
		return string(vmi.UID)
	}
}

// handedOver checks that the Machine's owner is told to remediate it: the
// OwnerRemediated condition False with reason WaitingForRemediation, in the
// v1beta2 conditions MachineSets and KubeadmControlPlanes read and the
// deprecated v1beta1 ones; and that ExternallyRemediated says why.
func handedOver(t *testing.T, tc *tenantCluster, m *clusterv1.Machine, why string) {
	t.Helper()
	g := NewWithT(t)
	cur := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}})
	c := conditions.Get(cur, clusterv1.MachineOwnerRemediatedCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(clusterv1.MachineOwnerRemediatedWaitingForRemediationReason))
	g.Expect(c.Message).To(ContainSubstring("KubevirtRemediation " + m.Name))
	g.Expect(v1beta1conditions.IsFalse(cur, clusterv1.MachineOwnerRemediatedV1Beta1Condition)).To(BeTrue())
	g.Expect(v1beta1conditions.GetReason(cur, clusterv1.MachineOwnerRemediatedV1Beta1Condition)).To(Equal(clusterv1.WaitingForRemediationV1Beta1Reason))
	g.Expect(conditions.GetReason(cur, clusterv1.MachineExternallyRemediatedCondition)).To(Equal(why))
	g.Expect(conditions.IsFalse(cur, clusterv1.MachineExternallyRemediatedCondition)).To(BeTrue())
	g.Expect(cur.UID).To(Equal(m.UID))
}

// remediationEvents polls the reasons of the Events recorded on a
// KubevirtRemediation, oldest first.
func remediationEvents(t *testing.T, tc *tenantCluster, rem *infrav1.KubevirtRemediation) func() []string {
	return func() []string {
		events := &eventsv1.EventList{}
		NewWithT(t).Expect(w.Env.Client.List(context.Background(), events, client.InNamespace(tc.ns))).To(Succeed())
		var mine []eventsv1.Event
		for _, e := range events.Items {
			if e.Regarding.Kind == "KubevirtRemediation" && e.Regarding.Name == rem.Name {
				mine = append(mine, e)
			}
		}
		slices.SortStableFunc(mine, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		reasons := make([]string, 0, len(mine))
		for _, e := range mine {
			reasons = append(reasons, e.Reason)
		}
		return reasons
	}
}

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

package world_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// vmiCondition reads one condition of a VM instance.
func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	if vmi == nil {
		return nil
	}
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// launcherPods lists the launcher pods of one VM instance.
func launcherPods(g Gomega, vmi *kubevirtv1.VirtualMachineInstance) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(w.Env.Client.List(context.Background(), pods, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})).To(Succeed())
	return pods.Items
}

// masqueradeVM is a VM on the pod network with masquerade, which
// KubeVirt can live migrate.
func masqueradeVM(ns, name string) *kubevirtv1.VirtualMachine {
	return vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
		spec := &v.Spec.Template.Spec
		spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}
	})
}

// migrate asks the real virt-controller to migrate v's instance.
func migrate(g Gomega, v *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstanceMigration {
	mig := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{GenerateName: "move-", Namespace: v.Namespace},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: v.Name}}
	g.Expect(w.Env.Client.Create(context.Background(), mig)).To(Succeed())
	return mig
}

// migrationPhase reads the phase of a migration.
func migrationPhase(mig *kubevirtv1.VirtualMachineInstanceMigration) func() kubevirtv1.VirtualMachineInstanceMigrationPhase {
	return func() kubevirtv1.VirtualMachineInstanceMigrationPhase {
		cur := &kubevirtv1.VirtualMachineInstanceMigration{}
		if err := w.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(mig), cur); err != nil {
			return ""
		}
		return cur.Status.Phase
	}
}

// TestMigrationMovesTheInstance asks the real virt-controller to migrate a
// VM on the pod network with masquerade: the simulated virt-handlers play
// both ends, and the same VM instance ends up on another node, with the
// target pod's address, and the source launcher completed.
func TestMigrationMovesTheInstance(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	v := masqueradeVM(ns, "migrated")
	first := runVM(g, v)
	g.Expect(vmiCondition(first, kubevirtv1.VirtualMachineInstanceIsMigratable)).To(
		HaveField("Status", corev1.ConditionTrue), "virt-handler judges a masquerade VM with a container disk migratable")

	g.Eventually(migrationPhase(migrate(g, v)), 90*time.Second).Should(Equal(kubevirtv1.MigrationSucceeded))

	after := vmiOf(g, v)()
	g.Expect(after.UID).To(Equal(first.UID), "a migration keeps the VM instance")
	g.Expect(after.Status.NodeName).NotTo(Equal(first.Status.NodeName))
	g.Expect(after.Labels).To(HaveKeyWithValue(kubevirtv1.NodeNameLabel, after.Status.NodeName))
	g.Expect(after.Status.MigrationState).To(HaveField("Completed", true))
	g.Expect(after.Status.Interfaces).NotTo(BeEmpty())
	g.Expect(after.Status.Interfaces[0].IP).NotTo(Equal(first.Status.Interfaces[0].IP), "masquerade: the guest is reached through the target pod")
	g.Eventually(func() map[string]corev1.PodPhase {
		phases := map[string]corev1.PodPhase{}
		for _, p := range launcherPods(g, after) {
			phases[p.Spec.NodeName] = p.Status.Phase
		}
		return phases
	}, 30*time.Second).Should(Equal(map[string]corev1.PodPhase{
		first.Status.NodeName: corev1.PodSucceeded, after.Status.NodeName: corev1.PodRunning}))
}

// TestMigrationOfABusyGuestFails plays a guest that dirties its memory
// faster than a migration copies it: the source aborts the migration at
// virt-launcher's completion timeout, the real virt-controller fails it,
// and the VM instance keeps running where it was.
func TestMigrationOfABusyGuestFails(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	v := masqueradeVM(ns, "busy")
	w.Sim.BusyGuest(ns, v.Name)
	first := runVM(g, v)

	g.Eventually(migrationPhase(migrate(g, v)), 90*time.Second).Should(Equal(kubevirtv1.MigrationFailed))

	after := vmiOf(g, v)()
	g.Expect(after.UID).To(Equal(first.UID))
	g.Expect(after.Status.Phase).To(Equal(kubevirtv1.Running), "the guest keeps running on its node")
	g.Expect(after.Status.NodeName).To(Equal(first.Status.NodeName))
	g.Expect(after.Status.MigrationState).To(HaveField("Failed", true))
	// 150 s for each started gigabyte of the 1Gi guest: two.
	g.Expect(after.Status.MigrationState.FailureReason).To(Equal("Live migration is not completed after 300 seconds and has been aborted"))
	pods := map[string]corev1.PodPhase{}
	for _, p := range launcherPods(g, after) {
		pods[p.Name] = p.Status.Phase
	}
	g.Expect(pods).To(HaveKeyWithValue(after.Status.MigrationState.SourcePod, corev1.PodRunning), "the source launcher still runs the guest")
}

// TestBridgedVMIsNotMigratable checks the simulated virt-handler's verdict
// on KubeVirt's default pod network binding, bridge: not migratable, with
// KubeVirt's reason.
func TestBridgedVMIsNotMigratable(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	v := vm(ns, "bridged", nil)
	c := vmiCondition(runVM(g, v), kubevirtv1.VirtualMachineInstanceIsMigratable)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable))
}

// TestCrashedGuestIsRestarted crashes a guest: the real virt-controller
// replaces the failed VM instance, as runStrategy Always asks.
func TestCrashedGuestIsRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := vm(ns, "crashing", nil)
	first := runVM(g, v)
	g.Expect(w.Sim.CrashInstance(ctx, ns, v.Name)).To(Succeed())
	g.Eventually(func() bool {
		again := vmiOf(g, v)()
		return again != nil && again.UID != first.UID && again.Status.Phase == kubevirtv1.Running
	}, 60*time.Second).Should(BeTrue(), "the VM did not run again in a new VM instance")
}

// TestDeadNodeKeepsItsInstances fails an infra node: it turns Ready
// Unknown with the unreachable taints and KubeVirt leaves its VM instance
// Running, as nothing there reports otherwise. Once the node is back, its
// virt-handler finds the guest gone and the VM starts again.
func TestDeadNodeKeepsItsInstances(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := vm(ns, "stranded", nil)
	first := runVM(g, v)
	node := first.Status.NodeName

	g.Expect(w.Sim.FailNode(ctx, node)).To(Succeed())
	recovered := false
	t.Cleanup(func() {
		if !recovered {
			NewWithT(t).Expect(w.Sim.RecoverNode(ctx, node)).To(Succeed())
		}
	})
	n := &corev1.Node{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", corev1.TaintNodeUnreachable)))
	g.Expect(n.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionUnknown))))
	g.Consistently(vmiOf(g, v), 5*time.Second).Should(And(phase(kubevirtv1.Running), HaveField("UID", first.UID)),
		"KubeVirt does not act on a VM instance whose node stopped reporting")

	g.Expect(w.Sim.RecoverNode(ctx, node)).To(Succeed())
	recovered = true
	g.Eventually(func() bool {
		again := vmiOf(g, v)()
		return again != nil && again.UID != first.UID && again.Status.Phase == kubevirtv1.Running
	}, 60*time.Second).Should(BeTrue(), "the VM did not start again once its node was back")
}

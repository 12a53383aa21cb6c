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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// TestLiveMigrateEviction drains the infra node under a VM with the
// LiveMigrate strategy: the real virt-controller migrates it, the
// simulator plays both virt-handlers, and the machine keeps its
// providerID while its conditions tell the migration.
func TestLiveMigrateEviction(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "mig-0", Mutate: migratable(kubevirtv1.EvictionStrategyLiveMigrate)})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, tc.reason(km, infrav1.LiveMigratableCondition)).ShouldNot(Equal("<none>"))
	g.Expect(condition(get(t, tc.c, km), infrav1.LiveMigratableCondition)).To(HavePrefix("True"))
	providerID := *get(t, tc.c, km).Spec.ProviderID

	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	source, uid := vmi.Status.NodeName, vmi.UID
	drained := drainInfraNode(t, source)
	eventually(t, drained).Should(Succeed())

	eventually(t, tc.reason(km, infrav1.MigratingCondition)).Should(Equal(infrav1.MigrationSucceededReason))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.UID).To(Equal(uid), "the same instance, migrated")
	g.Expect(vmi.Status.NodeName).NotTo(Equal(source))
	cur := get(t, tc.c, km)
	g.Expect(*cur.Spec.ProviderID).To(Equal(providerID))
	g.Expect(condition(cur, infrav1.MigratingCondition)).To(ContainSubstring(source))
	g.Expect(condition(cur, infrav1.EvacuatingCondition)).To(Equal("<none>"), "KubeVirt moved it; the provider did not")
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(get(t, tc.c, km).Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: vmi.Status.Interfaces[0].IP}))
}

// migratable gives a machine a VM KubeVirt can live migrate (masquerade
// on the pod network, no ReadWriteOnce claim) and an eviction strategy.
func migratable(strategy kubevirtv1.EvictionStrategy) func(*infrav1.KubevirtMachine) {
	return func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.EvictionStrategy = ptr.To(strategy)
		spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}
	}
}

// drainInfraNode cordons an infra node of the package's world and returns
// a poll that evicts its virt-launcher pods, as kubectl drain keeps
// doing, and succeeds once none is left.
func drainInfraNode(t *testing.T, node string) func() error {
	t.Helper()
	return drainInfraNodeOn(t, w.Env.Client, node)
}

// drainInfraNodeOn is drainInfraNode on the infra cluster c reaches.
func drainInfraNodeOn(t *testing.T, c client.Client, node string) func() error {
	t.Helper()
	cordonOn(t, c, node)
	return func() error {
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
			return err
		}
		left := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			left++
			if p.DeletionTimestamp.IsZero() {
				_ = c.SubResource("eviction").Create(context.Background(), p,
					&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			}
		}
		if left > 0 {
			return fmt.Errorf("%d virt-launcher pods left on %s", left, node)
		}
		return nil
	}
}

// machineEvents lists the reasons of the Events recorded on a
// KubevirtMachine.
func machineEvents(t *testing.T, tc *tenantCluster, km *infrav1.KubevirtMachine) []string {
	t.Helper()
	var reasons []string
	for _, e := range machineEventList(t, tc, km) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// machineEventList lists the Events regarding a KubevirtMachine.
func machineEventList(t *testing.T, tc *tenantCluster, km *infrav1.KubevirtMachine) []eventsv1.Event {
	t.Helper()
	events := &eventsv1.EventList{}
	NewWithT(t).Expect(w.Env.Client.List(context.Background(), events, client.InNamespace(tc.ns))).To(Succeed())
	var found []eventsv1.Event
	for _, e := range events.Items {
		if e.Regarding.Kind == "KubevirtMachine" && e.Regarding.Name == km.Name {
			found = append(found, e)
		}
	}
	return found
}

// TestCrashedInstanceRestarts crashes a guest: virt-handler reports the
// instance Failed and the real virt-controller starts a new one, as
// runStrategy Always asks. The machine says it restarts, not that it died,
// and is provisioned again with the same Machine.
func TestCrashedInstanceRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "crash-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	first := vmi.UID

	g.Expect(w.Sim.CrashInstance(ctx, tc.ns, km.Name)).To(Succeed())
	eventually(t, func() error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := infraGet(t, w.Env.Client, tc.ns, km.Name, cur); err != nil {
			return err
		}
		if cur.UID == first || cur.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("instance %s in phase %s", cur.UID, cur.Status.Phase)
		}
		return nil
	}).Should(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
	reasons := machineEvents(t, tc, km)
	g.Expect(reasons).NotTo(ContainElement(infrav1.StoppedReason), "a restarting machine is not reported dead")
	g.Expect(get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: km.Name, Namespace: tc.ns}}).DeletionTimestamp.IsZero()).To(BeTrue())
}

// TestDeletionDoesNotWaitForADeadInfraNode deletes a machine whose infra
// node died: KubeVirt cannot finish deleting an instance there, and a
// Machine's replacement waits for the old one to go, so the provider stops
// waiting for it, says so in a Warning Event, and removes its finalizer.
// The VM's leftovers go once the node is back. The machine runs on a node
// of its own so that no other test's machine is on the failed node.
func TestDeletionDoesNotWaitForADeadInfraNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	node := addInfraNode(t, "infra-doomed", nil)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "doomed-0", Mutate: func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		spec.Tolerations = []corev1.Toleration{{Key: doomedTaint.Key, Operator: corev1.TolerationOpExists, Effect: doomedTaint.Effect}}
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.Status.NodeName).To(Equal(node))

	g.Expect(w.Sim.FailNode(ctx, node)).To(Succeed())
	recovered := false
	recoverNode := func() {
		if !recovered {
			recovered = true
			NewWithT(t).Expect(w.Sim.RecoverNode(ctx, node)).To(Succeed())
		}
	}
	t.Cleanup(recoverNode)
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(km), &infrav1.KubevirtMachine{}))
	}).Should(BeTrue(), "the machine's deletion waited for the dead node")
	g.Expect(machineEvents(t, tc, km)).To(ContainElement("VirtualMachineStranded"))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachineInstance{})).To(Succeed(),
		"KubeVirt keeps the instance until the node is back")

	recoverNode()
	eventually(t, func() bool {
		return apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{})) &&
			apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachineInstance{}))
	}).Should(BeTrue(), "the VM and its instance go once KubeVirt can finish")
}

// doomedTaint keeps every VM but the test's own off a node the test kills.
var doomedTaint = corev1.Taint{Key: "test.capkv.io/doomed", Effect: corev1.TaintEffectNoSchedule}

// addInfraNode adds, for one test, a simulated infra node like the world's
// first one (so that no failure domain changes) with the devices given,
// tainted with doomedTaint. It is removed when the test ends, once no
// launcher pod is left on it.
func addInfraNode(t *testing.T, name string, devices map[corev1.ResourceName]int64) string {
	t.Helper()
	ctx := context.Background()
	spec := world.DefaultNodes()[0]
	spec.Name, spec.Taints, spec.Devices = name, []corev1.Taint{doomedTaint}, devices
	NewWithT(t).Expect(sim.CreateNodes(ctx, w.Env.Client, spec)).To(Succeed())
	t.Cleanup(func() {
		eventually(t, func() int {
			pods := &corev1.PodList{}
			NewWithT(t).Expect(w.Env.Client.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
			n := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName == name {
					n++
				}
			}
			return n
		}).Should(BeZero(), "launcher pods left on %s", name)
		NewWithT(t).Expect(w.Env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	})
	return name
}

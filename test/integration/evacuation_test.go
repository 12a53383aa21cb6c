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
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/evacuation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/tenantdrain"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// TestExternalEvictionDrainsTheTenantNode drains the infra node under a VM
// with the External eviction strategy, as kubectl drain does (cordon, then
// evict its pods until none is left): the real virt-api refuses the
// launcher pod's eviction and marks the instance; the provider cordons and
// drains the tenant Node (a real API server with a real disruption
// controller, so its PodDisruptionBudget holds the drain until it allows
// it), deletes the instance, and uncordons the Node once the VM runs on
// another infra node; the infra drain then completes.
func TestExternalEvictionDrainsTheTenantNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant, err := testenv.Start(testenv.Options{WithoutKubeVirtCRDs: true, WithoutProviderCRDs: true, WithKubeComponents: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = tenant.Stop() })
	tc := newTenantCluster(t, nil)
	connectTenant(t, tc, tenant)

	km := tc.newMachine(t, fixture.MachineOptions{Name: "ext-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.VirtualMachineTemplate.Spec.Template.Spec.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategyExternal)
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	// Bridged on the pod network: KubeVirt cannot live migrate it.
	eventually(t, tc.reason(km, infrav1.LiveMigratableCondition)).Should(Equal(string(kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable)))
	// The guest's kubelet registered its Node; Cluster API linked it.
	g.Expect(tenant.Client.Create(ctx, readyNode(km.Name))).To(Succeed())
	g.Expect(tenant.Client.Create(ctx, readyNode("other"))).To(Succeed())
	setNodeRef(t, tc, km.Name, km.Name)
	// Two replicas of a tenant app, one per Node, and a budget that allows
	// no disruption; a DaemonSet-like pod the drain must leave alone is
	// not needed to show the budget holds.
	startTenantPod(t, tenant.Client, "web-a", km.Name)
	startTenantPod(t, tenant.Client, "web-b", "other")
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	g.Expect(tenant.Client.Create(ctx, pdb)).To(Succeed())
	eventually(t, func() int32 {
		_ = tenant.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		return pdb.Status.CurrentHealthy
	}).Should(BeEquivalentTo(2))
	stopKubelet := playTenantKubelet(t, tenant.Client)
	defer stopKubelet()
	providerID := *get(t, tc.c, km).Spec.ProviderID

	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	source, firstUID := vmi.Status.NodeName, vmi.UID
	drained := drainInfraNode(t, source)

	// kubectl drain keeps evicting; the budget keeps refusing.
	g.Consistently(drained).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).ShouldNot(Succeed())
	eventually(t, tc.reason(km, infrav1.EvacuatingCondition)).Should(Equal(infrav1.TenantDrainBlockedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.EvacuatingCondition)).To(ContainSubstring(
		"default/web-a (The disruption budget web needs 2 healthy pods and has 2 currently)"))
	tenantNode := &corev1.Node{}
	g.Expect(tenant.Client.Get(ctx, types.NamespacedName{Name: km.Name}, tenantNode)).To(Succeed())
	g.Expect(tenantNode.Spec.Unschedulable).To(BeTrue())
	g.Expect(tenantNode.Annotations).To(HaveKey(tenantdrain.CordonedAnnotation))
	// The budget holds the VM where it is.
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.UID).To(Equal(firstUID))

	// The tenant's budget allows one disruption now: the drain proceeds.
	g.Expect(tenant.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	g.Expect(tenant.Client.Update(ctx, pdb)).To(Succeed())

	eventually(t, drained).Should(Succeed())
	eventually(t, func() error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := infraGet(t, w.Env.Client, tc.ns, km.Name, cur); err != nil {
			return err
		}
		if cur.UID == firstUID || cur.Status.NodeName == source || cur.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("instance %s on %q in phase %s", cur.UID, cur.Status.NodeName, cur.Status.Phase)
		}
		return nil
	}).Should(Succeed())
	eventually(t, tc.reason(km, infrav1.EvacuatingCondition)).Should(Equal(infrav1.EvacuatedReason))
	// The patch helper writes conditions before the rest of the status.
	eventually(t, func() *infrav1.EvacuationStatus { return get(t, tc.c, km).Status.Evacuation }).Should(BeNil())
	g.Expect(tenant.Client.Get(ctx, types.NamespacedName{Name: km.Name}, tenantNode)).To(Succeed())
	g.Expect(tenantNode.Spec.Unschedulable).To(BeFalse())
	g.Expect(tenantNode.Annotations).NotTo(HaveKey(tenantdrain.CordonedAnnotation))
	g.Expect(apierrors.IsNotFound(tenant.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web-a"}, &corev1.Pod{}))).To(BeTrue())
	cur := get(t, tc.c, km)
	g.Expect(cur.UID).To(Equal(km.UID))
	g.Expect(*cur.Spec.ProviderID).To(Equal(providerID), "the same machine, restarted elsewhere")
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(machineEvents(t, tc, km)).To(ContainElements(infrav1.TenantDrainBlockedReason, infrav1.RestartingVMReason, infrav1.EvacuatedReason))
}

// TestExternalEvictionLiveMigratesFirst drains the infra node under a VM
// with the External eviction strategy that can live migrate: the provider
// asks the real virt-controller for a migration, the simulator plays both
// virt-handlers, and the VM moves with its instance, its providerID and a
// tenant Node that is never cordoned.
func TestExternalEvictionLiveMigratesFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc, tenant, km := migratableMachineWithNode(t, "ext-mig-0", false)
	cordoned := watchCordon(t, tenant.Client, km.Name)
	providerID := *get(t, tc.c, km).Spec.ProviderID

	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	source, uid := vmi.Status.NodeName, vmi.UID
	eventually(t, drainInfraNode(t, source)).Should(Succeed())

	eventually(t, tc.reason(km, infrav1.EvacuatingCondition)).Should(Equal(infrav1.EvacuatedReason))
	cur := get(t, tc.c, km)
	g.Expect(condition(cur, infrav1.EvacuatingCondition)).To(MatchRegexp(
		"^False/Evacuated: live migration ext-mig-0-evac-[0-9a-z]+ moved the VM from infra node %s to ", source))
	g.Expect(condition(cur, infrav1.MigratingCondition)).To(HavePrefix("False/" + infrav1.MigrationSucceededReason))
	g.Expect(*cur.Spec.ProviderID).To(Equal(providerID))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.UID).To(Equal(uid), "the same instance, migrated")
	g.Expect(vmi.Status.NodeName).NotTo(Equal(source))
	// The migration the provider asked for goes with the instance.
	migrations := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	g.Expect(w.Env.Client.List(ctx, migrations, client.InNamespace(tc.ns), client.MatchingLabels{evacuation.MigrationLabel: km.Name})).To(Succeed())
	g.Expect(migrations.Items).To(HaveLen(1))
	g.Expect(migrations.Items[0].OwnerReferences).To(ConsistOf(HaveField("UID", uid)))
	g.Expect(cordoned()).To(BeFalse(), "the tenant Node was never cordoned")
	g.Expect(machineEvents(t, tc, km)).To(ContainElements(infrav1.LiveMigratingReason, infrav1.EvacuatedReason))
	g.Expect(machineEvents(t, tc, km)).NotTo(ContainElements(infrav1.DrainingTenantNodeReason, infrav1.TenantDrainBlockedReason, infrav1.RestartingVMReason))
	eventually(t, tc.provisioned(km)).Should(Succeed())
}

// TestExternalEvictionFallsBackWhenMigrationFails drains the infra node
// under a migratable VM whose guest dirties memory faster than a migration
// copies it: KubeVirt aborts the migration, and the provider abandons it,
// drains the tenant Node instead and restarts the VM on another node.
func TestExternalEvictionFallsBackWhenMigrationFails(t *testing.T) {
	g := NewWithT(t)
	tc, tenant, km := migratableMachineWithNode(t, "ext-busy-0", true)
	cordoned := watchCordon(t, tenant.Client, km.Name)
	stopKubelet := playTenantKubelet(t, tenant.Client)
	defer stopKubelet()

	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	source, firstUID := vmi.Status.NodeName, vmi.UID
	eventually(t, drainInfraNode(t, source)).Should(Succeed())

	eventually(t, tc.reason(km, infrav1.EvacuatingCondition)).Should(Equal(infrav1.EvacuatedReason))
	eventually(t, func() error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := infraGet(t, w.Env.Client, tc.ns, km.Name, cur); err != nil {
			return err
		}
		if cur.UID == firstUID || cur.Status.NodeName == source || cur.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("instance %s on %q in phase %s", cur.UID, cur.Status.NodeName, cur.Status.Phase)
		}
		return nil
	}).Should(Succeed())
	g.Expect(cordoned()).To(BeTrue(), "the tenant Node was drained once the migration failed")
	g.Expect(condition(get(t, tc.c, km), infrav1.MigratingCondition)).To(HavePrefix("False/" + infrav1.MigrationFailedReason))
	g.Expect(machineEvents(t, tc, km)).To(ContainElements(infrav1.LiveMigratingReason, "LiveMigrationAbandoned",
		infrav1.RestartingVMReason, infrav1.EvacuatedReason))
	eventually(t, tc.provisioned(km)).Should(Succeed())
}

// migratableMachineWithNode starts a tenant cluster with its own API
// server and a live-migratable machine with the External eviction
// strategy (its guest busy, when busy: its migrations fail), whose Node
// is registered and linked.
func migratableMachineWithNode(t *testing.T, name string, busy bool) (*tenantCluster, *testenv.Env, *infrav1.KubevirtMachine) {
	t.Helper()
	g := NewWithT(t)
	tenant, err := testenv.Start(testenv.Options{WithoutKubeVirtCRDs: true, WithoutProviderCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = tenant.Stop() })
	tc := newTenantCluster(t, nil)
	connectTenant(t, tc, tenant)

	km := tc.newMachine(t, fixture.MachineOptions{Name: name, Mutate: migratable(kubevirtv1.EvictionStrategyExternal)})
	if busy {
		w.Sim.BusyGuest(tc.ns, km.Name)
	}
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, tc.reason(km, infrav1.LiveMigratableCondition)).ShouldNot(Equal("<none>"))
	g.Expect(condition(get(t, tc.c, km), infrav1.LiveMigratableCondition)).To(HavePrefix("True"))
	g.Expect(tenant.Client.Create(context.Background(), readyNode(km.Name))).To(Succeed())
	setNodeRef(t, tc, km.Name, km.Name)
	return tc, tenant, km
}

// watchCordon polls a tenant Node until the test ends; the returned func
// says whether it was ever seen unschedulable.
func watchCordon(t *testing.T, c client.Client, name string) func() bool {
	ctx, cancel := context.WithCancel(context.Background())
	var seen atomic.Bool
	go func() {
		for ctx.Err() == nil {
			node := &corev1.Node{}
			if err := c.Get(ctx, types.NamespacedName{Name: name}, node); err == nil && node.Spec.Unschedulable {
				seen.Store(true)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(cancel)
	return seen.Load
}

// connectTenant makes env the tenant cluster of tc, as far as Cluster
// API's ClusterCache is concerned: a kubeconfig Secret, and the Cluster's
// infrastructure provisioned.
func connectTenant(t *testing.T, tc *tenantCluster, env *testenv.Env) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	user, err := env.AddUser(envtest.User{Name: "capkv-admin", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tc.cluster.Name + "-kubeconfig", Namespace: tc.ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: tc.cluster.Name}},
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kubeconfig},
	})).To(Succeed())
	cluster := get(t, tc.c, tc.cluster)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(w.Env.Client.Status().Update(ctx, cluster)).To(Succeed())
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}
}

// setNodeRef plays Cluster API linking the Machine to its Node.
func setNodeRef(t *testing.T, tc *tenantCluster, machine, node string) {
	t.Helper()
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: machine, Namespace: tc.ns}})
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	NewWithT(t).Expect(tc.c.Status().Update(context.Background(), m)).To(Succeed())
}

// startTenantPod creates a pod bound to a tenant Node and reports it
// running and ready, as that Node's kubelet would.
func startTenantPod(t *testing.T, c client.Client, name, node string) {
	t.Helper()
	g := NewWithT(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}
	g.Expect(c.Create(context.Background(), pod)).To(Succeed())
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	g.Expect(c.Status().Update(context.Background(), pod)).To(Succeed())
}

// playTenantKubelet removes tenant pods that are being deleted, as their
// kubelet would once their containers stopped.
func playTenantKubelet(t *testing.T, c client.Client) func() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods); err == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; !p.DeletionTimestamp.IsZero() {
						_ = c.Delete(ctx, p, client.GracePeriodSeconds(0))
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return cancel
}

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

package controllers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
)

// rawObject is obj as a hook request carries it.
func rawObject(g Gomega, obj client.Object, kind string) runtime.RawExtension {
	obj.GetObjectKind().SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
	data, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return runtime.RawExtension{Raw: data}
}

// setMachineCondition writes a condition onto the KubevirtMachine's status,
// as the machine controller would.
func setMachineCondition(g Gomega, km *infrav1.KubevirtMachine, c metav1.Condition) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(km), km)).To(Succeed())
	conditions.Set(km, c)
	g.Expect(env.Client.Status().Update(context.Background(), km)).To(Succeed())
}

// askTwoSockets asks hooks whether the machine's VM can go to two CPU
// sockets in place, as KubeadmControlPlane asks CanUpdateMachine.
func askTwoSockets(g Gomega, hooks *inplace.Hooks, machine *clusterv1.Machine, km *infrav1.KubevirtMachine) *runtimehooksv1.CanUpdateMachineResponse {
	return askCanUpdate(g, hooks, machine, km, func(desired *infrav1.KubevirtMachine) {
		desired.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.Sockets = 2
	})
}

// askCanUpdate asks hooks whether the machine can change as change says
// in place, as KubeadmControlPlane asks CanUpdateMachine.
func askCanUpdate(g Gomega, hooks *inplace.Hooks, machine *clusterv1.Machine, km *infrav1.KubevirtMachine, change func(*infrav1.KubevirtMachine)) *runtimehooksv1.CanUpdateMachineResponse {
	ctx := context.Background()
	current := &infrav1.KubevirtMachine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(km), current)).To(Succeed())
	desired := current.DeepCopy()
	change(desired)
	req := &runtimehooksv1.CanUpdateMachineRequest{}
	req.Current.Machine = *machine
	req.Current.InfrastructureMachine = rawObject(g, current, "KubevirtMachine")
	req.Desired.InfrastructureMachine = rawObject(g, desired, "KubevirtMachine")
	resp := &runtimehooksv1.CanUpdateMachineResponse{}
	hooks.CanUpdateMachine(ctx, req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	return resp
}

// TestInPlaceHooksReadTheMachines answers the in-place hooks against the
// real API server: CanUpdateMachine declines a hot-plug for a VM that
// cannot migrate, or has not said, and UpdateMachine follows the
// machine's InPlaceUpdated condition for the spec Cluster API wrote.
func TestInPlaceHooksReadTheMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tn := createTenant(t, ns, "inplace-hooks", nil, func(km *infrav1.KubevirtMachine) {
		d := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
		d.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 1, MaxSockets: 4}
	})
	km := tn.km
	machine := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, machine)).To(Succeed())
	hooks := &inplace.Hooks{Client: env.Client}

	canUpdate := func() *runtimehooksv1.CanUpdateMachineResponse { return askTwoSockets(g, hooks, machine, km) }
	resp := canUpdate()
	g.Expect(resp.Message).To(ContainSubstring("has not reported whether its VM can migrate"))
	g.Expect(string(resp.InfrastructureMachinePatch.Patch)).NotTo(ContainSubstring("sockets"))

	setMachineCondition(g, km, metav1.Condition{Type: infrav1.LiveMigratableCondition, Status: metav1.ConditionFalse,
		Reason: "InterfaceNotLiveMigratable", Message: "cannot migrate VMI which does not use masquerade"})
	g.Expect(canUpdate().Message).To(Equal("needs new machines: CPU sockets 1 to 2: KubeVirt hot-plugs by live migration, and the VM of machine " +
		km.Name + " cannot migrate: cannot migrate VMI which does not use masquerade"))

	setMachineCondition(g, km, metav1.Condition{Type: infrav1.LiveMigratableCondition, Status: metav1.ConditionTrue, Reason: "Migratable"})
	resp = canUpdate()
	g.Expect(resp.Message).To(Equal("in place: CPU sockets 1 to 2"))
	g.Expect(string(resp.InfrastructureMachinePatch.Patch)).To(ContainSubstring(`"sockets":2`))

	// A control-plane machine reached at its pod network address would
	// come back from the migration at another one.
	machine.Labels[clusterv1.MachineControlPlaneLabel] = ""
	g.Expect(canUpdate().Message).To(ContainSubstring("gives control-plane machine " + km.Name + " a new pod network address"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), tn.kc)).To(Succeed())
	tn.kc.Spec.Network.NodeAddressNetwork = "tenant"
	g.Expect(env.Client.Update(ctx, tn.kc)).To(Succeed())
	g.Eventually(func() string { return canUpdate().Message }).Should(Equal("in place: CPU sockets 1 to 2"),
		"a node address on a Multus network stays")

	update := func() *runtimehooksv1.UpdateMachineResponse {
		req := &runtimehooksv1.UpdateMachineRequest{}
		req.Desired.Machine = *machine
		req.Desired.InfrastructureMachine = rawObject(g, km.DeepCopy(), "KubevirtMachine")
		resp := &runtimehooksv1.UpdateMachineResponse{}
		hooks.UpdateMachine(ctx, req, resp)
		return resp
	}
	u := update()
	g.Expect(u.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(u.RetryAfterSeconds).To(BeEquivalentTo(5), "no word from the provider yet: ask again")

	// Whoever reaches the extension's port can call it: a request whose
	// Machine is not stored, or does not use the KubevirtMachine it
	// names, learns nothing.
	forged := &runtimehooksv1.UpdateMachineRequest{}
	forged.Desired.Machine = *machine.DeepCopy()
	forged.Desired.Machine.Name = "made-up"
	forged.Desired.InfrastructureMachine = rawObject(g, km.DeepCopy(), "KubevirtMachine")
	forgedResp := &runtimehooksv1.UpdateMachineResponse{}
	hooks.UpdateMachine(ctx, forged, forgedResp)
	g.Expect(forgedResp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(forgedResp.Message).To(ContainSubstring("reading Machine"))
	other := km.DeepCopy()
	other.Name = "someone-elses"
	forged.Desired.Machine = *machine
	forged.Desired.InfrastructureMachine = rawObject(g, other, "KubevirtMachine")
	hooks.UpdateMachine(ctx, forged, forgedResp)
	g.Expect(forgedResp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(forgedResp.Message).To(ContainSubstring("does not use KubevirtMachine"))

	setMachineCondition(g, km, metav1.Condition{Type: infrav1.InPlaceUpdatedCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.InPlaceUpdatingReason, Message: "KubeVirt hot-plugs 2 CPU sockets by a live migration to node infra-2"})
	u = update()
	g.Expect(u.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(u.RetryAfterSeconds).To(BeEquivalentTo(5))
	g.Expect(u.Message).To(ContainSubstring("by a live migration"))

	setMachineCondition(g, km, metav1.Condition{Type: infrav1.InPlaceUpdatedCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.InPlaceUpdateFailedReason, Message: "KubeVirt cannot apply the change"})
	u = update()
	g.Expect(u.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(u.Message).To(Equal("KubeVirt cannot apply the change"))

	setMachineCondition(g, km, metav1.Condition{Type: infrav1.InPlaceUpdatedCondition, Status: metav1.ConditionTrue,
		Reason: infrav1.InPlaceUpdatedReason, Message: "the running VM has what the spec asks"})
	u = update()
	g.Expect(u.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(u.RetryAfterSeconds).To(BeZero(), "done")

	// A condition written for an older spec does not answer for a newer
	// one.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(km), km)).To(Succeed())
	km.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.Sockets = 2
	g.Expect(env.Client.Update(ctx, km)).To(Succeed())
	g.Expect(conditions.Get(km, infrav1.InPlaceUpdatedCondition).ObservedGeneration).To(BeNumerically("<", km.Generation))
	u = update()
	g.Expect(u.RetryAfterSeconds).To(BeEquivalentTo(5))
}

// TestInPlaceHooksNeedAMigrationTarget answers CanUpdateMachine with the
// provider's InfraChecks on the real API server: a migratable VM is
// declined while KubeVirt's workload update methods lack LiveMigrate (a
// stock install), then while its node placement allows no infra node but
// its own, since the hot-plug's live migration would never start either
// way, and taken in place once a second node it may use is Ready.
func TestInPlaceHooksNeedAMigrationTarget(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := newNamespace(t)
	tn := createTenant(t, ns, "inplace-targets", nil, func(km *infrav1.KubevirtMachine) {
		km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 1, MaxSockets: 4}
	})
	km := tn.km
	setMachineCondition(g, km, metav1.Condition{Type: infrav1.LiveMigratableCondition, Status: metav1.ConditionTrue, Reason: "Migratable"})
	machine := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, machine)).To(Succeed())

	// Infra nodes of this test alone: a rack label no other test uses, and
	// no zone, so that no failure domain is discovered from them.
	rack := map[string]string{"capkv.test/rack": ns, kubevirtv1.NodeSchedulable: "true"}
	node := func(name string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: rack}}
		g.Expect(env.Client.Create(ctx, n)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		g.Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
		// The API server taints a new Node not-ready; the node lifecycle
		// controller, which this API server runs without, lifts it once
		// the Node is Ready.
		n.Spec.Taints = nil
		g.Expect(env.Client.Update(ctx, n)).To(Succeed())
	}
	node(ns + "-1")
	// KubeVirt's VMI has no status subresource: virt-handler writes it
	// with the object.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: km.Name},
		Spec:   kubevirtv1.VirtualMachineInstanceSpec{NodeSelector: map[string]string{"capkv.test/rack": ns}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{NodeName: ns + "-1", Phase: kubevirtv1.Running}}
	g.Expect(env.Client.Create(ctx, vmi)).To(Succeed())

	hooks := infraHooks(ctx, g)

	canUpdate := func() string { return askTwoSockets(g, hooks, machine, km).Message }
	declined := "needs new machines: CPU sockets 1 to 2: KubeVirt hot-plugs by live migration, and for the VM of machine " + km.Name + " "
	g.Eventually(canUpdate).WithTimeout(10*time.Second).Should(Equal(declined+
		"virt-controller would never start the migration: KubeVirt's spec.workloadUpdateStrategy.workloadUpdateMethods lacks LiveMigrate (docs/in-place-updates.md#turning-it-on)"),
		"no KubeVirt configuration live migrates workloads")

	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}, Spec: kubevirtv1.KubeVirtSpec{
		WorkloadUpdateStrategy: kubevirtv1.KubeVirtWorkloadUpdateStrategy{WorkloadUpdateMethods: []kubevirtv1.WorkloadUpdateMethod{kubevirtv1.WorkloadUpdateMethodLiveMigrate}}}}
	g.Expect(env.Client.Create(ctx, kv)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), kv) })
	g.Expect(canUpdate()).To(HavePrefix(declined + "no infra node but " + ns + "-1 can take the VM"))
	node(ns + "-2")
	g.Eventually(canUpdate).WithTimeout(10*time.Second).Should(Equal("in place: CPU sockets 1 to 2"), "a second node the VM may use")
}

// infraHooks are the hooks with the provider's own wiring: a manager's
// cache and the infra clusters it opens, until ctx ends.
func infraHooks(ctx context.Context, g Gomega) *inplace.Hooks {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(HaveOccurred())
	checker, err := infracluster.NewChecker(mgr.GetAPIReader(), env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()
	infra := &inplace.InfraChecks{Clients: infracluster.NewClients(mgr, checker)}
	return &inplace.Hooks{Client: env.Client, Targets: infra, Claims: infra}
}

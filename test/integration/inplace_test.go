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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// growable gives a machine's VM room to grow in place: one socket of four
// and 1Gi of guest memory of 4Gi.
func growable(km *infrav1.KubevirtMachine) {
	d := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
	d.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 1, Threads: 1, MaxSockets: 4}
	d.Memory.MaxGuest = ptr.To(resource.MustParse("4Gi"))
}

// updateInPlace writes a grown spec onto a KubevirtMachine as Cluster
// API's MachineSet controller does for an in-place update: the new spec
// with its update-in-progress annotation, in one write.
func updateInPlace(t *testing.T, tc *tenantCluster, km *infrav1.KubevirtMachine, sockets uint32, guest string) {
	t.Helper()
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, tc.c, km)
		cur.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		d := &cur.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
		d.CPU.Sockets, d.Memory.Guest = sockets, ptr.To(resource.MustParse(guest))
		cur.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "grown"}
		return tc.c.Update(context.Background(), cur)
	})).To(Succeed())
}

// TestInPlaceUpdateGrowsTheVM updates a running machine in place: the
// provider gives the VM two sockets, 2Gi and a new label, KubeVirt (with
// LiveMigrate among its workload update methods, as docs/in-place-updates.md
// says) hot-plugs them through a live migration, and InPlaceUpdated turns
// True with the same VM and instance.
func TestInPlaceUpdateGrowsTheVM(t *testing.T) {
	g := NewWithT(t)
	restore, err := testenv.PatchKubeVirt(context.Background(), w.Env.Client, testenv.LiveMigrateUpdatesPatch)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(restore(context.Background())).To(Succeed()) })
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "grown", Mutate: func(km *infrav1.KubevirtMachine) {
		migratable(kubevirtv1.EvictionStrategyLiveMigrate)(km)
		growable(km)
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(condition(get(t, tc.c, km), infrav1.InPlaceUpdatedCondition)).To(Equal("<none>"), "a machine never updated in place has no such condition")
	vm, vmi := &kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())

	updateInPlace(t, tc, km, 2, "2Gi")

	eventually(t, tc.reason(km, infrav1.InPlaceUpdatedCondition)).WithTimeout(120 * time.Second).Should(Equal(infrav1.InPlaceUpdatedReason))
	after, afterVMI := &kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, after)).To(Succeed())
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, afterVMI)).To(Succeed())
	g.Expect(after.UID).To(Equal(vm.UID))
	g.Expect(afterVMI.UID).To(Equal(vmi.UID), "the guest was not restarted")
	g.Expect(after.Spec.Template.Spec.Domain.CPU.Sockets).To(Equal(uint32(2)))
	g.Expect(after.Labels).To(HaveKeyWithValue("tier", "grown"))
	g.Expect(after.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineLabel, km.Name), "the provider's own labels stay")
	g.Expect(afterVMI.Status.CurrentCPUTopology.Sockets).To(Equal(uint32(2)))
	g.Expect(afterVMI.Status.Memory.GuestRequested.String()).To(Equal("2Gi"))
	g.Expect(afterVMI.Status.NodeName).NotTo(Equal(vmi.Status.NodeName), "KubeVirt hot-plugged through a live migration")
	g.Expect(get(t, tc.c, km).Status.Ready).To(BeTrue(), "the machine stayed ready")

	// The policy is checked again before the VM is changed (the webhooks
	// are off here): an annotation Multus would act on is not applied.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, tc.c, km)
		cur.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		cur.Spec.VirtualMachineTemplate.ObjectMeta.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "kube-system/host"}
		return tc.c.Update(context.Background(), cur)
	})).To(Succeed())
	eventually(t, tc.reason(km, infrav1.InPlaceUpdatedCondition)).Should(Equal(infrav1.NotAllowedByPolicyReason))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, after)).To(Succeed())
	g.Expect(after.Annotations).NotTo(HaveKey("k8s.v1.cni.cncf.io/networks"))
}

// TestInPlaceUpdateOfAnUnmigratableVMFails grows a VM that cannot live
// migrate: KubeVirt asks for a restart, and InPlaceUpdated fails with its
// reason rather than restarting the guest.
func TestInPlaceUpdateOfAnUnmigratableVMFails(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "bridged", Mutate: growable})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())

	updateInPlace(t, tc, km, 2, "2Gi")

	eventually(t, tc.reason(km, infrav1.InPlaceUpdatedCondition)).Should(Equal(infrav1.InPlaceUpdateFailedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.InPlaceUpdatedCondition)).To(And(
		ContainSubstring("asks for a restart"), ContainSubstring("Memory-hotplug is only available for migratable VMs")))
	after := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(vmi.UID), "the provider does not restart the guest by surprise")
}

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// growableVM is a VM with room to grow: one socket of four and 1Gi of
// guest memory of 4Gi.
func growableVM(v *kubevirtv1.VirtualMachine) {
	d := &v.Spec.Template.Spec.Domain
	d.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 1, Threads: 1, MaxSockets: 4}
	d.Memory.MaxGuest = ptr.To(resource.MustParse("4Gi"))
}

// grow asks a VM for a number of CPU sockets and an amount of guest memory.
func grow(ctx context.Context, g Gomega, v *kubevirtv1.VirtualMachine, sockets uint32, guest string) error {
	cur := &kubevirtv1.VirtualMachine{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(v), cur)).To(Succeed())
	before := cur.DeepCopy()
	d := &cur.Spec.Template.Spec.Domain
	d.CPU.Sockets, d.Memory.Guest = sockets, ptr.To(resource.MustParse(guest))
	return w.Env.Client.Patch(ctx, cur, client.MergeFrom(before))
}

// vmCondition reads one condition of a VM.
func vmCondition(g Gomega, v *kubevirtv1.VirtualMachine, t kubevirtv1.VirtualMachineConditionType) func() *kubevirtv1.VirtualMachineCondition {
	return func() *kubevirtv1.VirtualMachineCondition {
		cur := &kubevirtv1.VirtualMachine{}
		g.Expect(w.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(v), cur)).To(Succeed())
		for i := range cur.Status.Conditions {
			if cur.Status.Conditions[i].Type == t {
				return &cur.Status.Conditions[i]
			}
		}
		return nil
	}
}

// computeCPU is the CPU a launcher pod's compute container requests.
func computeCPU(p corev1.Pod) resource.Quantity {
	for _, c := range p.Spec.Containers {
		if c.Name == "compute" {
			return c.Resources.Requests[corev1.ResourceCPU]
		}
	}
	return resource.Quantity{}
}

// TestHotplugThroughMigration grows a running, migratable VM under
// KubeVirt's LiveUpdate rollout, with LiveMigrate among the workload update
// methods as docs/in-place-updates.md tells a platform engineer to set:
// the real virt-controller patches the VM instance and migrates it to a
// larger launcher pod (its workload updater), the simulated target
// virt-handler finishes the hot-plug, and the same VM instance runs with
// the new size and no restart pending.
func TestHotplugThroughMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	patchKubeVirt(t, w.Env.Client, testenv.LiveMigrateUpdatesPatch)
	ns := namespace(t)
	v := masqueradeVM(ns, "growing")
	growableVM(v)
	first := runVM(g, v)
	g.Expect(first.Status.CurrentCPUTopology).To(HaveField("Sockets", uint32(1)))
	g.Expect(first.Status.Memory).NotTo(BeNil())
	g.Expect(first.Status.Memory.GuestAtBoot.String()).To(Equal("1Gi"))
	sourceCPU := computeCPU(launcherPods(g, first)[0])

	g.Expect(grow(ctx, g, v, 2, "2Gi")).To(Succeed())

	g.Eventually(func(g Gomega) {
		vmi := vmiOf(g, v)()
		g.Expect(vmi.UID).To(Equal(first.UID), "a hot-plug keeps the VM instance")
		g.Expect(vmi.Status.CurrentCPUTopology).To(HaveField("Sockets", uint32(2)))
		g.Expect(vmi.Status.Memory.GuestRequested.String()).To(Equal("2Gi"))
		g.Expect(vmi.Status.Memory.GuestCurrent.String()).To(Equal("2Gi"))
		g.Expect(vmi.Status.Memory.GuestAtBoot.String()).To(Equal("1Gi"))
		g.Expect(vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceVCPUChange)).To(BeNil())
		g.Expect(vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceMemoryChange)).To(BeNil())
	}, 120*time.Second).Should(Succeed())

	after := vmiOf(g, v)()
	g.Expect(after.Status.NodeName).NotTo(Equal(first.Status.NodeName), "the hot-plug went through a live migration")
	migs := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	g.Expect(w.Env.Client.List(ctx, migs, client.InNamespace(ns))).To(Succeed())
	g.Expect(migs.Items).To(HaveLen(1))
	g.Expect(migs.Items[0].Annotations).To(HaveKey(kubevirtv1.WorkloadUpdateMigrationAnnotation), "virt-controller's workload updater started it")
	g.Eventually(migrationPhase(&migs.Items[0]), 30*time.Second).Should(Equal(kubevirtv1.MigrationSucceeded))
	for _, p := range launcherPods(g, after) {
		if p.Spec.NodeName == after.Status.NodeName {
			targetCPU := computeCPU(p)
			g.Expect(targetCPU.Cmp(sourceCPU)).To(Equal(1), "the target launcher is sized for two sockets: %s, source %s", targetCPU.String(), sourceCPU.String())
		}
	}
	g.Consistently(vmCondition(g, v, kubevirtv1.VirtualMachineRestartRequired), 3*time.Second).Should(BeNil())
}

// TestHotplugNeedsAMigratableVM grows a VM that cannot live-migrate (the
// pod network bridged): KubeVirt asks for a restart for the memory and
// leaves the CPU change pending, since it hot-plugs only by migrating.
func TestHotplugNeedsAMigratableVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// With LiveMigrate on, so that no migration is KubeVirt's refusal,
	// not the stock CR's.
	patchKubeVirt(t, w.Env.Client, testenv.LiveMigrateUpdatesPatch)
	ns := namespace(t)
	v := vm(ns, "bridged-growing", growableVM)
	first := runVM(g, v)

	// Memory alone first: KubeVirt judges it before any migration.
	g.Expect(grow(ctx, g, v, 1, "2Gi")).To(Succeed())
	g.Eventually(vmCondition(g, v, kubevirtv1.VirtualMachineRestartRequired), 30*time.Second).Should(And(
		Not(BeNil()), HaveField("Message", ContainSubstring("Memory-hotplug is only available for migratable VMs"))))

	vmi := vmiOf(g, v)()
	g.Expect(vmi.UID).To(Equal(first.UID))
	g.Expect(vmi.Status.Memory.GuestRequested.String()).To(Equal("1Gi"), "the guest keeps its memory until a restart")
	migs := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	g.Expect(w.Env.Client.List(ctx, migs, client.InNamespace(ns))).To(Succeed())
	g.Expect(migs.Items).To(BeEmpty())
}

// TestHotplugPendsWithoutMigration grows the CPU of a VM that cannot
// live-migrate: KubeVirt patches the instance and marks the hot-plug in
// progress, but with no migration to carry it the change stays pending.
func TestHotplugPendsWithoutMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// With LiveMigrate on, so that no migration is KubeVirt's refusal,
	// not the stock CR's.
	patchKubeVirt(t, w.Env.Client, testenv.LiveMigrateUpdatesPatch)
	ns := namespace(t)
	v := vm(ns, "bridged-cpu", growableVM)
	runVM(g, v)

	g.Expect(grow(ctx, g, v, 2, "1Gi")).To(Succeed())
	g.Eventually(func() *kubevirtv1.VirtualMachineInstanceCondition {
		return vmiCondition(vmiOf(g, v)(), kubevirtv1.VirtualMachineInstanceVCPUChange)
	}, 30*time.Second).Should(HaveField("Status", corev1.ConditionTrue))
	g.Consistently(func(g Gomega) {
		vmi := vmiOf(g, v)()
		g.Expect(vmi.Status.CurrentCPUTopology).To(HaveField("Sockets", uint32(1)))
		migs := &kubevirtv1.VirtualMachineInstanceMigrationList{}
		g.Expect(w.Env.Client.List(ctx, migs, client.InNamespace(ns))).To(Succeed())
		g.Expect(migs.Items).To(BeEmpty())
	}, 5*time.Second).Should(Succeed())
}

// TestGrowthBeyondTheMaximumIsRefused checks virt-api's webhook: a VM that
// sets its maxima cannot ask for more.
func TestGrowthBeyondTheMaximumIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := masqueradeVM(ns, "capped")
	growableVM(v)
	g.Expect(w.Env.Client.Create(ctx, v)).To(Succeed())
	err := grow(ctx, g, v, 5, "1Gi")
	g.Expect(err).To(MatchError(ContainSubstring("Number of sockets in CPU topology is greater than the maximum sockets allowed")))
	err = grow(ctx, g, v, 1, "6Gi")
	g.Expect(err).To(MatchError(ContainSubstring("Guest memory is greater than the configured maxGuest memory")))
}

// TestVolumeHotplug plugs a blank DataVolume into a running VM through
// virt-api's addvolume, as the tenant's CSI driver does. virt-api refuses
// it on a stock KubeVirt; with the HotplugVolumes gate on, as
// docs/tenant-cloud.md says, the real virt-controller adds it to the VM
// instance and starts an attachment pod on its node, the simulated
// virt-handler mounts and attaches it, and it turns Ready with a target.
// removevolume takes it out: unmounted, its attachment pod deleted, its
// status gone.
func TestVolumeHotplug(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := masqueradeVM(ns, "plugged")
	g.Expect(w.Env.Client.Create(ctx, v)).To(Succeed())
	dv := dataVolume(ns, "extra", world.StandardClass, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}})
	g.Expect(w.Env.Client.Create(ctx, dv)).To(Succeed())
	g.Eventually(vmiOf(g, v), 60*time.Second).Should(phase(kubevirtv1.Running))
	g.Eventually(dvPhase(g, dv), 60*time.Second).Should(Equal(cdiv1.Succeeded))
	virt, err := world.NewVirtSubresourceClient(w.Env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	add := &kubevirtv1.AddVolumeOptions{Name: "extra",
		Disk:         &kubevirtv1.Disk{Serial: "extra-serial", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "extra"}}}

	err = world.PutVirtSubresource(ctx, virt, ns, "virtualmachines", v.Name, "addvolume", add)
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "a stock KubeVirt refuses: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("Enable DeclarativeHotplugVolumes or HotplugVolumes feature gate")))

	patchKubeVirt(t, w.Env.Client, testenv.HotplugVolumesPatch)
	// virt-api reads the gate through an informer.
	g.Eventually(func() error {
		return world.PutVirtSubresource(ctx, virt, ns, "virtualmachines", v.Name, "addvolume", add)
	}, 30*time.Second).Should(Succeed())
	first := vmiOf(g, v)()
	var attachPod string
	g.Eventually(func(g Gomega) {
		vmi := vmiOf(g, v)()
		g.Expect(vmi.UID).To(Equal(first.UID), "a hot-plug keeps the VM instance")
		vs := volumeStatus(vmi, "extra")
		g.Expect(vs).NotTo(BeNil())
		g.Expect(vs.Phase).To(Equal(kubevirtv1.VolumeReady))
		g.Expect(vs.Target).To(Equal("sda"))
		g.Expect(vs.HotplugVolume).NotTo(BeNil())
		attachPod = vs.HotplugVolume.AttachPodName
	}, 60*time.Second).Should(Succeed())
	pod := &corev1.Pod{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: attachPod}, pod)).To(Succeed())
	g.Expect(pod.Spec.NodeName).To(Equal(first.Status.NodeName), "the attachment pod runs beside the launcher")
	g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", "extra")))
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(v), vm)).To(Succeed())
	g.Expect(vm.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Name", "extra")), "the VM keeps it across restarts")

	g.Expect(world.PutVirtSubresource(ctx, virt, ns, "virtualmachines", v.Name, "removevolume",
		&kubevirtv1.RemoveVolumeOptions{Name: "extra"})).To(Succeed())
	g.Eventually(func() *kubevirtv1.VolumeStatus { return volumeStatus(vmiOf(g, v)(), "extra") }, 60*time.Second).Should(BeNil())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	}, 30*time.Second).Should(BeTrue(), "virt-controller deletes the attachment pod")
	g.Expect(vmiOf(g, v)().UID).To(Equal(first.UID))
}

// volumeStatus is the status of one of a VMI's volumes, or nil.
func volumeStatus(vmi *kubevirtv1.VirtualMachineInstance, name string) *kubevirtv1.VolumeStatus {
	if vmi == nil {
		return nil
	}
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == name {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

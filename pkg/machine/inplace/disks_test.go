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

package inplace

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestClaimRequest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     string
		overhead *kubevirtv1.Percent
		want     int64
	}{
		// CDI's GetRequiredSpace: 20Gi plus 5.5%, rounded up.
		{name: "file system, CDI's default overhead", size: "20Gi", overhead: ptr.To(kubevirtv1.Percent("0.055")), want: 22655952487},
		{name: "block: no overhead", size: "20Gi", want: 20 << 30},
		{name: "aligned to 1Mi first", size: "1000000", overhead: ptr.To(kubevirtv1.Percent("0")), want: 1 << 20},
		{name: "an overhead KubeVirt would not accept counts as none", size: "2Gi", overhead: ptr.To(kubevirtv1.Percent("1.5")), want: 2 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClaimRequest(resource.MustParse(tc.size), tc.overhead)
			NewWithT(t).Expect(got.Value()).To(Equal(tc.want))
		})
	}
}

// grownVM is a running VM whose root disk was made at 20Gi and whose
// claim requests and has the given storage.
func grownVM(requests, capacity string) (*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance) {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{
		DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}}}}},
		Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes: []kubevirtv1.Volume{{Name: "rootdisk", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "m-rootdisk"}}}}}},
	}}
	vm.Spec.DataVolumeTemplates[0].Name = "m-rootdisk"
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running,
		VolumeStatus: []kubevirtv1.VolumeStatus{{Name: "rootdisk", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{
			ClaimName: "m-rootdisk", FilesystemOverhead: ptr.To(kubevirtv1.Percent("0")),
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(requests)},
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
		}}}}}
	return vm, vmi
}

func TestClaimsToGrow(t *testing.T) {
	at := func(size string) Want {
		return WantOf(&infrav1.KubevirtMachineSpec{RootDisk: &infrav1.RootDiskSpec{DiskSize: resource.MustParse(size)}})
	}
	t.Run("a disk as made is left alone, whatever CDI requested for it", func(t *testing.T) {
		g := NewWithT(t)
		vm, vmi := grownVM("19Gi", "19Gi")
		grow, pending := ClaimsToGrow(at("20Gi"), vm, vmi)
		g.Expect(grow).To(BeEmpty())
		g.Expect(pending).To(BeEmpty())
		g.Expect(Progress(at("20Gi"), vm, vmi).IsDone()).To(BeTrue())
	})
	t.Run("a larger disk: its claim grows, and the update waits for the capacity", func(t *testing.T) {
		g := NewWithT(t)
		vm, vmi := grownVM("20Gi", "20Gi")
		grow, pending := ClaimsToGrow(at("40Gi"), vm, vmi)
		g.Expect(grow).To(Equal([]ClaimGrowth{{Claim: "m-rootdisk", Request: *resource.NewQuantity(40<<30, resource.BinarySI)}}))
		g.Expect(pending).To(Equal([]string{"disk rootdisk to 40Gi (claim m-rootdisk has 20.00Gi of 40.00Gi)"}))
		o := Progress(at("40Gi"), vm, vmi)
		g.Expect(o.IsDone()).To(BeFalse())
		g.Expect(o.Message).To(Equal("waiting for the infra cluster to grow disk rootdisk to 40Gi (claim m-rootdisk has 20.00Gi of 40.00Gi)"))
	})
	t.Run("asked, not yet grown: nothing more to ask", func(t *testing.T) {
		g := NewWithT(t)
		vm, vmi := grownVM("40Gi", "20Gi")
		grow, pending := ClaimsToGrow(at("40Gi"), vm, vmi)
		g.Expect(grow).To(BeEmpty())
		g.Expect(pending).To(HaveLen(1))
	})
	t.Run("grown: done", func(t *testing.T) {
		g := NewWithT(t)
		vm, vmi := grownVM("40Gi", "40Gi")
		grow, pending := ClaimsToGrow(at("40Gi"), vm, vmi)
		g.Expect(grow).To(BeEmpty())
		g.Expect(pending).To(BeEmpty())
		g.Expect(Progress(at("40Gi"), vm, vmi).IsDone()).To(BeTrue())
	})
	t.Run("KubeVirt has not reported the claim", func(t *testing.T) {
		g := NewWithT(t)
		vm, vmi := grownVM("20Gi", "20Gi")
		vmi.Status.VolumeStatus = nil
		grow, pending := ClaimsToGrow(at("40Gi"), vm, vmi)
		g.Expect(grow).To(BeEmpty())
		g.Expect(pending).To(Equal([]string{"disk rootdisk to 40Gi (KubeVirt has not reported its claim)"}))
	})
}

func TestGrownDisks(t *testing.T) {
	g := NewWithT(t)
	current := spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
		s.DataDisks = []infrav1.DataDiskSpec{{Name: "a", DiskSize: resource.MustParse("1Gi")}, {Name: "b", DiskSize: resource.MustParse("1Gi")}}
	})
	covered := current.DeepCopy()
	covered.DataDisks[1].DiskSize = resource.MustParse("2Gi")
	g.Expect(GrownDisks(current, covered)).To(Equal(map[string]resource.Quantity{"b": resource.MustParse("2Gi")}))
	covered.RootDisk.DiskSize = resource.MustParse("30Gi")
	g.Expect(GrownDisks(current, covered)).To(Equal(map[string]resource.Quantity{"b": resource.MustParse("2Gi"), "rootdisk": resource.MustParse("30Gi")}))
}

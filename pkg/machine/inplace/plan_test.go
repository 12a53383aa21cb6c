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
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// spec is a machine of 2 sockets and 4Gi, with room for 8 sockets and
// 16Gi.
func spec(mutate func(d *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec)) *infrav1.KubevirtMachineSpec {
	s := &infrav1.KubevirtMachineSpec{
		RootDisk: &infrav1.RootDiskSpec{DiskSize: resource.MustParse("20Gi")},
		VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: kubevirtv1.VirtualMachineSpec{
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					CPU:    &kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1, MaxSockets: 8},
					Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("4Gi")), MaxGuest: ptr.To(resource.MustParse("16Gi"))},
				},
			}},
		}},
	}
	if mutate != nil {
		mutate(&s.VirtualMachineTemplate.Spec.Template.Spec.Domain, s)
	}
	return s
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		desired  *infrav1.KubevirtMachineSpec
		current  *infrav1.KubevirtMachineSpec
		changes  []string
		declined []string
	}{
		{name: "nothing changed", desired: spec(nil)},
		{name: "more sockets and memory, within the maxima",
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.CPU.Sockets = 4
				d.Memory.Guest = ptr.To(resource.MustParse("8Gi"))
			}),
			changes: []string{"CPU sockets 2 to 4", "guest memory 4Gi to 8Gi"}},
		{name: "the VirtualMachine's labels",
			desired: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "blue"}
			}),
			changes: []string{"the VirtualMachine's labels and annotations"}},
		{name: "a label removed from the VirtualMachine",
			current: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "blue", "tier": "gold"}
			}),
			desired: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "red"}
			}),
			declined: []string{"label tier removed from the VirtualMachine: only added or changed labels and annotations apply in place"}},
		{name: "sockets beyond maxSockets",
			desired:  spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.Sockets = 12 }),
			declined: []string{"CPU sockets 2 to 12: beyond the VM's maxSockets, 8"}},
		{name: "fewer sockets",
			desired:  spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.Sockets = 1 }),
			declined: []string{"CPU sockets 2 to 1: KubeVirt removes sockets only on a restart"}},
		{name: "no maxSockets",
			current: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.MaxSockets = 0 }),
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.CPU.MaxSockets = 0
				d.CPU.Sockets = 4
			}),
			declined: []string{"CPU sockets 2 to 4: the VM sets no maxSockets to grow into"}},
		{name: "more cores, which need a restart",
			desired:  spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.Cores = 2 }),
			declined: []string{"spec.virtualMachineTemplate.spec.template.spec.domain.cpu.cores changed: only CPU sockets, guest memory, disk sizes and the VirtualMachine's labels and annotations change in place"}},
		{name: "memory beyond maxGuest",
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.Memory.Guest = ptr.To(resource.MustParse("32Gi"))
			}),
			declined: []string{"guest memory 4Gi to 32Gi: beyond the VM's maxGuest, 16Gi"}},
		{name: "less memory",
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.Memory.Guest = ptr.To(resource.MustParse("2Gi"))
			}),
			declined: []string{"guest memory 4Gi to 2Gi: KubeVirt shrinks memory only on a restart"}},
		{name: "memory not in 2Mi steps",
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.Memory.Guest = ptr.To(resource.MustParse("5001Mi"))
			}),
			declined: []string{"guest memory 5001Mi: KubeVirt hot-plugs memory in steps of 2Mi"}},
		{name: "memory of 1Gi hugepages not in 1Gi steps",
			current: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "1Gi"}
			}),
			desired: spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
				d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "1Gi"}
				d.Memory.Guest = ptr.To(resource.MustParse("4608Mi"))
			}),
			declined: []string{"guest memory 4608Mi: KubeVirt hot-plugs memory in steps of 1Gi"}},
		{name: "a VM sized by a preset",
			current: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.Preset = &infrav1.PresetSpec{Name: "density"}
			}),
			desired: spec(func(d *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.Preset = &infrav1.PresetSpec{Name: "density"}
				d.Memory.Guest = ptr.To(resource.MustParse("8Gi"))
			}),
			declined: []string{"guest memory 4Gi to 8Gi: the VM is sized by preset density, which sets its resources from its size"}},
		{name: "an arm64 VM",
			current: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.VirtualMachineTemplate.Spec.Template.Spec.Architecture = "arm64"
			}),
			desired: spec(func(d *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.VirtualMachineTemplate.Spec.Template.Spec.Architecture = "arm64"
				d.CPU.Sockets = 4
			}),
			declined: []string{"CPU sockets 2 to 4: KubeVirt hot-plugs CPU and memory on amd64 only, and the VM is arm64"}},
		{name: "a new image, with more sockets and a larger disk",
			desired: spec(func(d *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				d.CPU.Sockets = 4
				s.RootDisk.DiskSize = resource.MustParse("30Gi")
				s.RootDisk.Image.HTTP = &infrav1.HTTPImageSource{URL: "http://images/node-v2.qcow2"}
			}),
			// A disk that is replaced anyway does not grow on its own.
			changes: []string{"CPU sockets 2 to 4"},
			declined: []string{"spec.rootDisk.diskSize changed: only CPU sockets, guest memory, disk sizes and the VirtualMachine's labels and annotations change in place",
				"spec.rootDisk.image.http changed: only CPU sockets, guest memory, disk sizes and the VirtualMachine's labels and annotations change in place"}},
		{name: "larger root and data disks",
			current: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("10Gi")}}
			}),
			desired: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.RootDisk.DiskSize = resource.MustParse("40Gi")
				s.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("15Gi")}}
			}),
			changes: []string{"root disk 20Gi to 40Gi", "data disk data 10Gi to 15Gi"}},
		{name: "a smaller root disk",
			desired: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.RootDisk.DiskSize = resource.MustParse("10Gi")
			}),
			declined: []string{"root disk 20Gi to 10Gi: a claim never shrinks"}},
		{name: "a data disk larger and of another class",
			current: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("10Gi")}}
			}),
			desired: spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
				s.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("15Gi"), StorageClassName: ptr.To("fast")}}
			}),
			declined: []string{"spec.dataDisks changed: only CPU sockets, guest memory, disk sizes and the VirtualMachine's labels and annotations change in place"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			current := tc.current
			if current == nil {
				current = spec(nil)
			}
			p := Decide(current, tc.desired)
			g.Expect(p.Changes).To(Equal(tc.changes))
			g.Expect(p.Declined).To(Equal(tc.declined))
			g.Expect(p.Complete()).To(Equal(len(tc.declined) == 0))
			if p.Complete() {
				g.Expect(equality.Semantic.DeepEqual(p.Covered, *tc.desired)).To(BeTrue(), "a complete plan covers the desired spec")
			} else {
				g.Expect(equality.Semantic.DeepEqual(p.Covered, *tc.desired)).To(BeFalse())
			}
			g.Expect(equality.Semantic.DeepEqual(*current, *spec(nil)) || tc.current != nil).To(BeTrue(), "the current spec is left alone")
		})
	}
}

func TestPatchCoversThePlan(t *testing.T) {
	g := NewWithT(t)
	current := spec(nil)
	desired := spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.Sockets = 4 })
	p := Decide(current, desired)
	g.Expect(p.Complete()).To(BeTrue())

	template := &infrav1.KubevirtMachineTemplate{Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: *current}}}
	raw, err := json.Marshal(template)
	g.Expect(err).NotTo(HaveOccurred())
	patch, err := Patch(current, &p.Covered, TemplateSpecPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(patch)).To(MatchJSON(`{"spec":{"template":{"spec":{"virtualMachineTemplate":{"spec":{"template":{"spec":{"domain":{"cpu":{"sockets":4}}}}}}}}}}`))
	patched, err := jsonpatch.MergePatch(raw, patch)
	g.Expect(err).NotTo(HaveOccurred())
	after := &infrav1.KubevirtMachineTemplate{}
	g.Expect(json.Unmarshal(patched, after)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(after.Spec.Template.Spec, *desired)).To(BeTrue(), "the patched template is the desired one")

	unchanged, err := Patch(current, current, MachineSpecPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(unchanged)).To(MatchJSON(`{"spec":{}}`))
}

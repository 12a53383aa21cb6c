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

// Package inplace decides which changes of a KubevirtMachine's spec the
// provider can apply to the running VM instead of replacing the machine,
// for Cluster API's in-place updates: more CPU sockets and more guest
// memory within the maxima the VM was built with, larger disks, and the
// VM object's own labels and annotations. Everything else needs a new VM and is declined
// with the reason. It is pure: specs in, a plan out.
package inplace

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Plan is what can be applied in place of a change from one spec to
// another.
type Plan struct {
	// Covered is the current spec with every change applied that the
	// provider can make to the running VM.
	Covered infrav1.KubevirtMachineSpec
	// Changes describe those changes, for the user.
	Changes []string
	// Declined says, for each change left out, why it needs a new VM.
	Declined []string
}

// Complete reports whether the plan covers every change.
func (p Plan) Complete() bool { return len(p.Declined) == 0 }

// KubeVirt's memory hot-plug rules (pkg/liveupdate/memory of v1.7.0): the
// guest size is a multiple of 2Mi (of 1Gi with 1Gi hugepages) and at least
// 1Gi.
var (
	memoryAlignment = resource.MustParse("2Mi")
	minimumMemory   = resource.MustParse("1Gi")
)

// MemoryStep is the unit KubeVirt hot-plugs the memory m in, and the
// multiple its guest size and maximum must be: 2Mi, or 1Gi with 1Gi
// hugepages.
func MemoryStep(m *kubevirtv1.Memory) resource.Quantity {
	if m != nil && m.Hugepages != nil && m.Hugepages.PageSize == "1Gi" {
		return minimumMemory
	}
	return memoryAlignment
}

// MinimumMemory is the least guest memory KubeVirt hot-plugs into.
func MinimumMemory() resource.Quantity { return minimumMemory }

// Limits say why running VMs cannot take some changes; empty: they can.
type Limits struct {
	// NoHotplug declines more CPU sockets and memory.
	NoHotplug string
	// NoGrowth declines larger disks.
	NoGrowth string
}

// Decide plans the change from current to desired.
func Decide(current, desired *infrav1.KubevirtMachineSpec) Plan {
	return DecideFor(current, desired, Limits{})
}

// DecideFor plans the change for running VMs that cannot take what the
// limits say, and declines those changes with the limits' reasons.
func DecideFor(current, desired *infrav1.KubevirtMachineSpec, limits Limits) Plan {
	noHotplug := limits.NoHotplug
	p := Plan{Covered: *current.DeepCopy()}
	// judged is covered plus the changes declined with a reason of their
	// own, so that what is left is named once, by its field path.
	judged := current.DeepCopy()
	vm, judgedVM, want := &p.Covered.VirtualMachineTemplate, &judged.VirtualMachineTemplate, &desired.VirtualMachineTemplate

	// The VM object's own labels and annotations reach neither the
	// instance nor the guest. Only added and changed keys are applied: the
	// VM carries keys of others too, so one that is gone from the template
	// cannot be told from theirs.
	if !maps.Equal(vm.ObjectMeta.Labels, want.ObjectMeta.Labels) || !maps.Equal(vm.ObjectMeta.Annotations, want.ObjectMeta.Annotations) {
		for _, t := range []*infrav1.VirtualMachineTemplateSpec{vm, judgedVM} {
			t.ObjectMeta.Labels = maps.Clone(want.ObjectMeta.Labels)
			t.ObjectMeta.Annotations = maps.Clone(want.ObjectMeta.Annotations)
		}
		removed := append(removedKeys("label", current.VirtualMachineTemplate.ObjectMeta.Labels, want.ObjectMeta.Labels),
			removedKeys("annotation", current.VirtualMachineTemplate.ObjectMeta.Annotations, want.ObjectMeta.Annotations)...)
		p.record("the VirtualMachine's labels and annotations", strings.Join(removed, "; "), func() {})
		if len(removed) > 0 {
			vm.ObjectMeta = *current.VirtualMachineTemplate.ObjectMeta.DeepCopy()
		}
	}

	if d, jd, wd := domainOf(vm), domainOf(judgedVM), domainOf(want); d != nil && wd != nil {
		// What stops a running VM from growing at all.
		var stop string
		switch arch := vm.Spec.Template.Spec.Architecture; {
		case current.Preset != nil:
			stop = "the VM is sized by preset " + current.Preset.Name + ", which sets its resources from its size"
		case arch != "" && arch != "amd64":
			stop = "KubeVirt hot-plugs CPU and memory on amd64 only, and the VM is " + arch
		case noHotplug != "":
			stop = noHotplug
		}
		if ok, change, declined := cpuSockets(d.CPU, wd.CPU); ok {
			if stop != "" && declined == "" {
				change, declined = "", change+": "+stop
			}
			jd.CPU.Sockets = wd.CPU.Sockets
			p.record(change, declined, func() { d.CPU.Sockets = wd.CPU.Sockets })
		}
		if ok, change, declined := guestMemory(d.Memory, wd.Memory); ok {
			if stop != "" && declined == "" {
				change, declined = "", change+": "+stop
			}
			jd.Memory.Guest = wd.Memory.Guest
			p.record(change, declined, func() { d.Memory.Guest = ptrCopy(wd.Memory.Guest) })
		}
	}
	p.judgeDisks(current, desired, judged, limits.NoGrowth)
	for _, path := range differences(judged, desired) {
		p.Declined = append(p.Declined, path+" changed: only CPU sockets, guest memory, disk sizes and the VirtualMachine's labels and annotations change in place")
	}
	return p
}

// removedKeys names the keys of from that to lacks, for a decline.
func removedKeys(kind string, from, to map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(from)) {
		if _, kept := to[k]; !kept {
			out = append(out, fmt.Sprintf("%s %s removed from the VirtualMachine: only added or changed labels and annotations apply in place", kind, k))
		}
	}
	return out
}

// record keeps a judged change: applied to Covered, or declined.
func (p *Plan) record(change, declined string, apply func()) {
	if declined != "" {
		p.Declined = append(p.Declined, declined)
		return
	}
	apply()
	p.Changes = append(p.Changes, change)
}

func domainOf(t *infrav1.VirtualMachineTemplateSpec) *kubevirtv1.DomainSpec {
	if t.Spec.Template == nil {
		return nil
	}
	return &t.Spec.Template.Spec.Domain
}

func ptrCopy(q *resource.Quantity) *resource.Quantity {
	c := q.DeepCopy()
	return &c
}

// cpuSockets judges a change of the CPU in its sockets alone (ok false:
// none, or other CPU fields changed too, which need a restart): KubeVirt
// adds sockets to a running VM up to the maxSockets it started with, and
// removes them only on a restart.
func cpuSockets(cur, want *kubevirtv1.CPU) (ok bool, change, declined string) {
	if cur == nil || want == nil || cur.Sockets == want.Sockets {
		return false, "", ""
	}
	rest := *cur.DeepCopy()
	rest.Sockets = want.Sockets
	if !equality.Semantic.DeepEqual(rest, *want) {
		return false, "", ""
	}
	from, to, most := cur.Sockets, want.Sockets, cur.MaxSockets
	switch {
	case to < from:
		return true, "", fmt.Sprintf("CPU sockets %d to %d: KubeVirt removes sockets only on a restart", from, to)
	case most == 0:
		return true, "", fmt.Sprintf("CPU sockets %d to %d: the VM sets no maxSockets to grow into", from, to)
	case to > most:
		return true, "", fmt.Sprintf("CPU sockets %d to %d: beyond the VM's maxSockets, %d", from, to, most)
	}
	return true, fmt.Sprintf("CPU sockets %d to %d", from, to), ""
}

// guestMemory judges a change of the memory in its guest size alone:
// KubeVirt grows a running VM's memory up to the maxGuest it started
// with, in steps of 2Mi and from 1Gi, and shrinks it only on a restart.
func guestMemory(cur, want *kubevirtv1.Memory) (ok bool, change, declined string) {
	if cur == nil || want == nil || cur.Guest == nil || want.Guest == nil || cur.Guest.Cmp(*want.Guest) == 0 {
		return false, "", ""
	}
	rest := *cur.DeepCopy()
	rest.Guest = want.Guest
	if !equality.Semantic.DeepEqual(rest, *want) {
		return false, "", ""
	}
	from, to := cur.Guest.String(), want.Guest.String()
	alignment := MemoryStep(cur)
	switch {
	case want.Guest.Cmp(*cur.Guest) < 0:
		return true, "", fmt.Sprintf("guest memory %s to %s: KubeVirt shrinks memory only on a restart", from, to)
	case cur.MaxGuest == nil:
		return true, "", fmt.Sprintf("guest memory %s to %s: the VM sets no maxGuest to grow into", from, to)
	case want.Guest.Cmp(*cur.MaxGuest) > 0:
		return true, "", fmt.Sprintf("guest memory %s to %s: beyond the VM's maxGuest, %s", from, to, cur.MaxGuest.String())
	case want.Guest.Value()%alignment.Value() != 0:
		return true, "", fmt.Sprintf("guest memory %s: KubeVirt hot-plugs memory in steps of %s", to, alignment.String())
	case want.Guest.Cmp(minimumMemory) < 0:
		return true, "", fmt.Sprintf("guest memory %s: KubeVirt hot-plugs memory only from %s", to, minimumMemory.String())
	}
	return true, fmt.Sprintf("guest memory %s to %s", from, to), ""
}

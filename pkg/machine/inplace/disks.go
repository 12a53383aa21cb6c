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
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// judgeDisks plans the growth of the root disk and of data disks whose
// size alone changed: a claim of a class that allows expansion grows
// while the VM runs, and KubeVirt, with its ExpandDisks feature gate,
// gives the guest the larger disk. Claims never shrink. stop, when set,
// says why the claims cannot grow (declines every growth with it).
func (p *Plan) judgeDisks(current, desired, judged *infrav1.KubevirtMachineSpec, stop string) {
	judge := func(what string, cur, want resource.Quantity, apply func()) {
		from, to := cur.String(), want.String()
		switch {
		case want.Cmp(cur) < 0:
			p.record("", fmt.Sprintf("%s %s to %s: a claim never shrinks", what, from, to), apply)
		case stop != "":
			p.record("", fmt.Sprintf("%s %s to %s: %s", what, from, to, stop), apply)
		default:
			p.record(fmt.Sprintf("%s %s to %s", what, from, to), "", apply)
		}
	}
	if cur, want := current.RootDisk, desired.RootDisk; sizeAlone(cur, want, func(d *infrav1.RootDiskSpec) *resource.Quantity { return &d.DiskSize }) {
		judged.RootDisk.DiskSize = want.DiskSize
		judge("root disk", cur.DiskSize, want.DiskSize, func() { p.Covered.RootDisk.DiskSize = want.DiskSize })
	}
	if len(current.DataDisks) != len(desired.DataDisks) {
		return
	}
	for i := range current.DataDisks {
		cur, want := &current.DataDisks[i], &desired.DataDisks[i]
		if cur.Name != want.Name || !sizeAlone(cur, want, func(d *infrav1.DataDiskSpec) *resource.Quantity { return &d.DiskSize }) {
			continue
		}
		judged.DataDisks[i].DiskSize = want.DiskSize
		judge("data disk "+cur.Name, cur.DiskSize, want.DiskSize, func() { p.Covered.DataDisks[i].DiskSize = want.DiskSize })
	}
}

// sizeAlone says whether two disks differ in their size alone.
func sizeAlone[D any](cur, want *D, size func(*D) *resource.Quantity) bool {
	if cur == nil || want == nil || size(cur).Cmp(*size(want)) == 0 {
		return false
	}
	rest := new(D)
	*rest = *want
	*size(rest) = *size(cur)
	return equality.Semantic.DeepEqual(*rest, *cur)
}

// diskSizes is the size spec asks of each of its disks, by the name of
// the VM's volume.
func diskSizes(spec *infrav1.KubevirtMachineSpec) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	if spec.RootDisk != nil {
		out[goldenplan.RootDiskName] = spec.RootDisk.DiskSize
	}
	for _, d := range spec.DataDisks {
		out[d.Name] = d.DiskSize
	}
	return out
}

// GrownDisks are the disks covered asks to be larger than current does,
// with the size it asks, by the name of the VM's volume.
func GrownDisks(current, covered *infrav1.KubevirtMachineSpec) map[string]resource.Quantity {
	from, to := diskSizes(current), diskSizes(covered)
	out := map[string]resource.Quantity{}
	for name, size := range to {
		if was, ok := from[name]; ok && was.Cmp(size) < 0 {
			out[name] = size
		}
	}
	return out
}

// ClaimGrowth is a claim to grow, and the storage it is to request.
type ClaimGrowth struct {
	Claim   string
	Request resource.Quantity
}

// ClaimsToGrow reads, from the instance's volume status (which
// virt-controller keeps from the claims), which claims must request more
// storage for the disks to have the sizes w asks, and which disks have not
// got it yet. A disk no larger than the VM's DataVolume template made it
// is left alone: its claim is as CDI sized it.
func ClaimsToGrow(w Want, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (grow []ClaimGrowth, pending []string) {
	for _, name := range slices.Sorted(maps.Keys(w.Disks)) {
		size := w.Disks[name]
		if made, ok := madeSize(vm, name); !ok || size.Cmp(made) <= 0 {
			continue
		}
		var claim *kubevirtv1.PersistentVolumeClaimInfo
		if vmi != nil {
			for _, vs := range vmi.Status.VolumeStatus {
				if vs.Name == name {
					claim = vs.PersistentVolumeClaimInfo
				}
			}
		}
		if claim == nil {
			pending = append(pending, fmt.Sprintf("disk %s to %s (KubeVirt has not reported its claim)", name, size.String()))
			continue
		}
		need := ClaimRequest(size, claim.FilesystemOverhead)
		if has := claim.Requests[corev1.ResourceStorage]; has.Cmp(need) < 0 {
			grow = append(grow, ClaimGrowth{Claim: claim.ClaimName, Request: need})
		}
		if has := claim.Capacity[corev1.ResourceStorage]; has.Cmp(need) < 0 {
			pending = append(pending, fmt.Sprintf("disk %s to %s (claim %s has %s of %s)", name, size.String(), claim.ClaimName, gib(has), gib(need)))
		}
	}
	return grow, pending
}

// madeSize is the size the VM's DataVolume template of volume asks: what
// its disk was made with.
func madeSize(vm *kubevirtv1.VirtualMachine, volume string) (resource.Quantity, bool) {
	if vm == nil || vm.Spec.Template == nil {
		return resource.Quantity{}, false
	}
	i := slices.IndexFunc(vm.Spec.Template.Spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == volume && v.DataVolume != nil })
	if i < 0 {
		return resource.Quantity{}, false
	}
	dv := vm.Spec.Template.Spec.Volumes[i].DataVolume.Name
	for _, t := range vm.Spec.DataVolumeTemplates {
		if t.Name != dv {
			continue
		}
		switch {
		case t.Spec.Storage != nil:
			return t.Spec.Storage.Resources.Requests[corev1.ResourceStorage], true
		case t.Spec.PVC != nil:
			return t.Spec.PVC.Resources.Requests[corev1.ResourceStorage], true
		}
	}
	return resource.Quantity{}, false
}

// gib writes a claim's storage in GiB: CDI's overhead makes byte counts
// no unit divides.
func gib(q resource.Quantity) string {
	return strconv.FormatFloat(float64(q.Value())/(1<<30), 'f', 2, 64) + "Gi"
}

// alignment is the block CDI aligns disk images to.
const alignment = 1 << 20

// ClaimRequest is the storage a claim requests for a disk of size on a
// file system that keeps overhead of it, as CDI sizes a DataVolume's
// claim (GetRequiredSpace, pkg/util of v1.64.0): the size aligned to
// 1Mi, plus the overhead. A block claim has none.
func ClaimRequest(size resource.Quantity, overhead *kubevirtv1.Percent) resource.Quantity {
	aligned := (size.Value() + alignment - 1) / alignment * alignment
	share := 0.0
	if overhead != nil {
		if f, err := strconv.ParseFloat(string(*overhead), 64); err == nil && f > 0 && f < 1 {
			share = f
		}
	}
	return *resource.NewQuantity(int64(math.Ceil(float64(aligned)*(1+share))), resource.BinarySI)
}

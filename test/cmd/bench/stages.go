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

package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// cloneTypeAnnotation is the claim annotation in which CDI records the
// clone method it used (docs/kubevirt-behaviour.md#clone-phases-and-methods).
const cloneTypeAnnotation = "cdi.kubevirt.io/cloneType"

// vmRunning names the stage from a root disk's Succeeded to its VM
// instance's Running.
const vmRunning = "VM start"

// The stages from a KubevirtMachine's creation to its VM's, by role: a
// machine creates its VM, and so starts its disk's clone, only once its
// bootstrap data exists, and a worker's exists once its control plane is
// up.
const (
	untilVMControlPlane = "until VM created: control plane"
	untilVMWorker       = "until VM created: worker"
)

// Stage is how long the root disks spent in one of CDI's phases (or, for
// "VM start", from the disk's Succeeded to its VM instance running), over
// the root disks that went through it.
type Stage struct {
	Name          string  `json:"name"`
	Count         int     `json:"count"`
	MedianSeconds float64 `json:"medianSeconds"`
	P90Seconds    float64 `json:"p90Seconds"`
	MaxSeconds    float64 `json:"maxSeconds"`
}

// stageClock notes when each root disk DataVolume was first seen in each
// of CDI's phases, and when each VM instance was first seen Running, from
// watches: CDI keeps no time per phase, and its Events of one reason are
// aggregated.
type stageClock struct {
	mu sync.Mutex
	// disks are, by DataVolume name (namespace/name), when each phase was
	// first seen.
	disks map[string]map[string]time.Time
	// running is, by VM instance name, when it was first seen Running.
	running map[string]time.Time
}

// startStageClock watches the root disk DataVolumes and the VM instances
// through c, which must not have started yet.
func startStageClock(ctx context.Context, c cache.Cache) (*stageClock, error) {
	sc := &stageClock{disks: map[string]map[string]time.Time{}, running: map[string]time.Time{}}
	dvs, err := c.GetInformer(ctx, &cdiv1.DataVolume{})
	if err != nil {
		return nil, err
	}
	onDisk := func(obj any) {
		if dv, ok := obj.(*cdiv1.DataVolume); ok && strings.HasSuffix(dv.Name, rootDiskSuffix) && dv.Labels[goldenplan.Label] != "true" {
			sc.note(sc.disks, dv.Namespace+"/"+dv.Name, string(dv.Status.Phase))
		}
	}
	if _, err := dvs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onDisk, UpdateFunc: func(_, obj any) { onDisk(obj) }}); err != nil {
		return nil, err
	}
	vmis, err := c.GetInformer(ctx, &kubevirtv1.VirtualMachineInstance{})
	if err != nil {
		return nil, err
	}
	onVMI := func(obj any) {
		if vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance); ok && vmi.Status.Phase == kubevirtv1.Running {
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if _, seen := sc.running[vmi.Namespace+"/"+vmi.Name]; !seen {
				sc.running[vmi.Namespace+"/"+vmi.Name] = time.Now()
			}
		}
	}
	if _, err := vmis.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onVMI, UpdateFunc: func(_, obj any) { onVMI(obj) }}); err != nil {
		return nil, err
	}
	return sc, nil
}

func (sc *stageClock) note(into map[string]map[string]time.Time, key, phase string) {
	if phase == "" {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if into[key] == nil {
		into[key] = map[string]time.Time{}
	}
	if _, seen := into[key][phase]; !seen {
		into[key][phase] = time.Now()
	}
}

// stages summarizes what the clock saw, with the stages before the VMs.
func (sc *stageClock) stages(before map[string][]time.Duration) []Stage {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	durations := maps.Clone(before)
	if durations == nil {
		durations = map[string][]time.Duration{}
	}
	for key, phases := range sc.disks {
		order := slices.SortedFunc(maps.Keys(phases), func(a, b string) int { return phases[a].Compare(phases[b]) })
		for i := 0; i+1 < len(order); i++ {
			durations[order[i]] = append(durations[order[i]], phases[order[i+1]].Sub(phases[order[i]]))
		}
		succeeded, ok := phases[string(cdiv1.Succeeded)]
		vm, _ := strings.CutSuffix(key, rootDiskSuffix)
		if running, started := sc.running[vm]; ok && started {
			durations[vmRunning] = append(durations[vmRunning], max(0, running.Sub(succeeded)))
		}
	}
	return summarize(durations)
}

// rootDiskSuffix ends the name of a root disk's DataVolume, after its VM's.
const rootDiskSuffix = "-" + goldenplan.RootDiskName

// summarize gives each stage's count, median, 90th percentile and maximum,
// in the order the stages most often come.
func summarize(durations map[string][]time.Duration) []Stage {
	var out []Stage
	for name, ds := range durations {
		slices.Sort(ds)
		out = append(out, Stage{Name: name, Count: len(ds), MedianSeconds: quantile(ds, 0.5).Seconds(),
			P90Seconds: quantile(ds, 0.9).Seconds(), MaxSeconds: ds[len(ds)-1].Seconds()})
	}
	slices.SortFunc(out, func(a, b Stage) int { return stageRank(a.Name) - stageRank(b.Name) })
	return out
}

// stageRank orders CDI's clone phases as a clone goes through them
// (docs/kubevirt-behaviour.md#clone-phases-and-methods), then the VM.
func stageRank(name string) int {
	order := []cdiv1.DataVolumePhase{cdiv1.Pending, cdiv1.PendingPopulation, cdiv1.CloneScheduled,
		cdiv1.SnapshotForSmartCloneInProgress, cdiv1.CloneFromSnapshotSourceInProgress, cdiv1.CSICloneInProgress,
		cdiv1.CloneInProgress, cdiv1.PrepClaimInProgress, cdiv1.RebindInProgress, cdiv1.Succeeded}
	if i := slices.Index(order, cdiv1.DataVolumePhase(name)); i >= 0 {
		return i
	}
	switch name {
	case vmRunning:
		return len(order) + 1
	case untilVMControlPlane:
		return -2
	case untilVMWorker:
		return -1
	}
	return len(order)
}

// untilVMCreated reads, from the KubevirtMachines and VMs through c, how
// long each machine waited for its VM (untilVMStages).
func untilVMCreated(ctx context.Context, c client.Reader) (map[string][]time.Duration, error) {
	kms := &infrav1.KubevirtMachineList{}
	if err := c.List(ctx, kms); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // another provider's machines (--no-provider)
		}
		return nil, err
	}
	vms := &kubevirtv1.VirtualMachineList{}
	if err := c.List(ctx, vms); err != nil {
		return nil, err
	}
	return untilVMStages(kms.Items, vms.Items), nil
}

// untilVMStages are the times from each KubevirtMachine's creation to its
// VM's (same namespace and name), by the machine's role. Machines without a
// VM are left out.
func untilVMStages(kms []infrav1.KubevirtMachine, vms []kubevirtv1.VirtualMachine) map[string][]time.Duration {
	created := map[string]time.Time{}
	for _, vm := range vms {
		created[vm.Namespace+"/"+vm.Name] = vm.CreationTimestamp.Time
	}
	out := map[string][]time.Duration{}
	for _, km := range kms {
		at, ok := created[km.Namespace+"/"+km.Name]
		if !ok {
			continue
		}
		stage := untilVMWorker
		if _, cp := km.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			stage = untilVMControlPlane
		}
		out[stage] = append(out[stage], max(0, at.Sub(km.CreationTimestamp.Time)))
	}
	return out
}

// quantile is the nearest-rank q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cloneMethods counts the root disk claims by the clone method CDI
// recorded on them.
func cloneMethods(ctx context.Context, c client.Reader) (map[string]int, error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, claims); err != nil {
		return nil, err
	}
	methods := map[string]int{}
	for _, claim := range claims.Items {
		if method := claim.Annotations[cloneTypeAnnotation]; method != "" && strings.HasSuffix(claim.Name, rootDiskSuffix) {
			methods[method]++
		}
	}
	return methods, nil
}

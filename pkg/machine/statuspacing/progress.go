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

package statuspacing

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// progress follows machines through their provisioning stages for the
// metrics, in memory: the status holds only the current step, and
// intermediate steps are not even written (Hold). After a restart a
// machine's current stage is not timed, as its start was not seen.
type progress struct {
	mu       sync.Mutex
	machines map[types.NamespacedName]*machineProgress
}

type machineProgress struct {
	uid   types.UID
	stage string
	since time.Time
	// timed is false for a stage whose start this process did not see.
	timed bool
	// failure is the reason of the failure the machine is in, if any.
	failure string
	// provisioned is set once the machine's provisioning was counted.
	provisioned bool
}

// Track records, after a reconcile, where a machine stands for the
// metrics: its phase and reason, a failure it entered, and the end of a
// provisioning stage. stored is the machine as read, km as reconciled.
func (s *Keeper) Track(stored, km *infrav1.KubevirtMachine, o outcome.Outcome, now time.Time) {
	key := types.NamespacedName{Namespace: km.Namespace, Name: km.Name}
	phase, reason := phaseOf(km, o)
	metrics.Machines.Set(key.String(), phase, reason)

	p := s.progress.of(key, km.UID)
	s.progress.mu.Lock()
	defer s.progress.mu.Unlock()
	if o.State == outcome.Failed && km.DeletionTimestamp.IsZero() {
		if p.failure != o.Reason {
			metrics.MachineFailures.WithLabelValues(o.Reason).Inc()
		}
		p.failure = o.Reason
	} else {
		p.failure = ""
	}
	if !km.DeletionTimestamp.IsZero() {
		p.stage = ""
		return
	}
	if p.provisioned || provisioned(km) {
		return
	}
	stage := StageOf(km)
	switch {
	case p.stage == "":
		// A machine without a VM condition is new: its first stage
		// started when it was created.
		fresh := !conditions.Has(stored, infrav1.VirtualMachineReadyCondition)
		p.stage, p.since, p.timed = stage, now, fresh
		if fresh {
			p.since = km.CreationTimestamp.Time
		}
	case p.stage != stage:
		p.endStage(now)
		p.stage, p.since, p.timed = stage, now, true
	}
}

// FirstProvisioned reports whether the machine turns provisioned for the
// first time as far as this process knows, and if so observes its
// provisioning time and last stage, and the clone of its root disk
// (cloneMethod, empty for none). A cache that has not seen the provisioned
// status yet does not count it twice.
func (s *Keeper) FirstProvisioned(km *infrav1.KubevirtMachine, cloneMethod string, now time.Time) bool {
	key := types.NamespacedName{Namespace: km.Namespace, Name: km.Name}
	p := s.progress.of(key, km.UID)
	s.progress.mu.Lock()
	defer s.progress.mu.Unlock()
	if p.provisioned {
		return false
	}
	p.provisioned = true
	if p.stage != "" {
		p.endStage(now)
	}
	metrics.MachineProvisioningSeconds.Observe(now.Sub(km.CreationTimestamp.Time).Seconds())
	if cloneMethod != "" {
		metrics.GoldenImageClones.WithLabelValues(cloneMethod).Inc()
	}
	return true
}

// endStage observes the stage that ends now, if its start was seen.
func (p *machineProgress) endStage(now time.Time) {
	if p.timed {
		metrics.MachineStageSeconds.WithLabelValues(p.stage).Observe(now.Sub(p.since).Seconds())
	}
}

// of returns the progress of a machine, new for a new UID.
func (t *progress) of(key types.NamespacedName, uid types.UID) *machineProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.machines == nil {
		t.machines = map[types.NamespacedName]*machineProgress{}
	}
	p := t.machines[key]
	if p == nil || p.uid != uid {
		p = &machineProgress{uid: uid}
		t.machines[key] = p
	}
	return p
}

// oldest is, per stage, the seconds the machine longest in it has been
// there, for machines still provisioning.
func (t *progress) oldest(now time.Time) map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ages := map[string]float64{}
	for _, p := range t.machines {
		if p.provisioned || p.stage == "" {
			continue
		}
		ages[p.stage] = max(ages[p.stage], now.Sub(p.since).Seconds())
	}
	return ages
}

// ReportStageAges makes this keeper the source of the
// capkv_machine_stage_oldest_seconds gauge.
func (s *Keeper) ReportStageAges() {
	metrics.OldestInStage.SetSource(func() map[string]float64 { return s.progress.oldest(time.Now()) })
}

func (t *progress) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.machines, key)
	metrics.Machines.Forget(key.String())
}

// phaseOf is where a machine stands for the capkv_machines gauge, and the
// reason shown with it: a failure's own reason, else the VM's.
func phaseOf(km *infrav1.KubevirtMachine, o outcome.Outcome) (string, string) {
	reason := conditions.GetReason(km, infrav1.VirtualMachineReadyCondition)
	switch {
	case !km.DeletionTimestamp.IsZero():
		return metrics.PhaseDeleting, infrav1.DeletingReason
	case o.State == outcome.Failed:
		return metrics.PhaseFailed, o.Reason
	case provisioned(km):
		return metrics.PhaseProvisioned, reason
	}
	return metrics.PhaseProvisioning, reason
}

// StageOf names the provisioning stage a machine's conditions show.
func StageOf(km *infrav1.KubevirtMachine) string {
	switch conditions.GetReason(km, infrav1.VirtualMachineReadyCondition) {
	case infrav1.WaitingForBootstrapDataReason:
		return metrics.StageBootstrapData
	case infrav1.WaitingForGoldenImageReason, infrav1.GoldenImageFailedReason, infrav1.CloneNotAuthorizedReason:
		return metrics.StageGoldenImage
	case infrav1.DiskImportingReason, infrav1.DiskCloningReason, infrav1.DiskPendingReason, infrav1.DiskFailedReason:
		return metrics.StageRootDisk
	case infrav1.PendingReason, infrav1.UnschedulableReason, infrav1.InsufficientDevicesReason:
		return metrics.StageScheduling
	case infrav1.BootingReason, infrav1.StartFailedReason, infrav1.CrashLoopBackOffReason, infrav1.NodeNetworkNotFoundReason:
		return metrics.StageBoot
	case infrav1.ReadyReason, infrav1.AdoptedReason:
		return metrics.StageBootstrapCheck
	}
	return metrics.StageOther
}

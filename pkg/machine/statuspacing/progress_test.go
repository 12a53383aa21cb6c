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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

func TestStageOf(t *testing.T) {
	for reason, want := range map[string]string{
		infrav1.WaitingForBootstrapDataReason: metrics.StageBootstrapData,
		infrav1.WaitingForGoldenImageReason:   metrics.StageGoldenImage,
		infrav1.DiskCloningReason:             metrics.StageRootDisk,
		infrav1.UnschedulableReason:           metrics.StageScheduling,
		infrav1.PendingReason:                 metrics.StageScheduling,
		infrav1.BootingReason:                 metrics.StageBoot,
		infrav1.ReadyReason:                   metrics.StageBootstrapCheck,
		infrav1.InfraClusterUnreachableReason: metrics.StageOther,
	} {
		km := &infrav1.KubevirtMachine{}
		conditions.Set(km, metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionFalse, Reason: reason})
		if got := StageOf(km); got != want {
			t.Errorf("StageOf(%s) = %s, want %s", reason, got, want)
		}
	}
}

// stageCount is how many times a stage was observed.
func stageCount(t *testing.T, stage string) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := metrics.MachineStageSeconds.WithLabelValues(stage).(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestTrackTimesStagesAndFailuresOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	created := t0.Add(-5 * time.Second)
	machine := func(reason string) *infrav1.KubevirtMachine {
		km := &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "progress", Name: "m", UID: "uid-1",
			CreationTimestamp: metav1.Time{Time: created}}}
		if reason != "" {
			conditions.Set(km, metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionFalse, Reason: reason})
		}
		return km
	}
	s := &Keeper{}
	bootstrapData, scheduling := stageCount(t, metrics.StageBootstrapData), stageCount(t, metrics.StageScheduling)
	failures := testutil.ToFloat64(metrics.MachineFailures.WithLabelValues(infrav1.UnschedulableReason))

	// A new machine: its first stage started at its creation.
	s.Track(machine(""), machine(infrav1.WaitingForBootstrapDataReason), outcome.Wait(infrav1.WaitingForBootstrapDataReason, ""), t0)
	s.Track(machine(infrav1.WaitingForBootstrapDataReason), machine(infrav1.PendingReason), outcome.Wait(infrav1.PendingReason, ""), t0.Add(time.Second))
	if got := stageCount(t, metrics.StageBootstrapData) - bootstrapData; got != 1 {
		t.Errorf("bootstrap_data observed %d times, want 1", got)
	}
	// A failure counts once however often it is reconciled.
	for range 3 {
		s.Track(machine(infrav1.PendingReason), machine(infrav1.UnschedulableReason), outcome.Fail(infrav1.UnschedulableReason, ""), t0.Add(2*time.Second))
	}
	if got := testutil.ToFloat64(metrics.MachineFailures.WithLabelValues(infrav1.UnschedulableReason)) - failures; got != 1 {
		t.Errorf("failures counted %v, want 1", got)
	}
	// Scheduling (Pending, then Unschedulable) ends when the VM boots.
	s.Track(machine(infrav1.UnschedulableReason), machine(infrav1.BootingReason), outcome.Wait(infrav1.BootingReason, ""), t0.Add(3*time.Second))
	if got := stageCount(t, metrics.StageScheduling) - scheduling; got != 1 {
		t.Errorf("scheduling observed %d times, want 1", got)
	}

	// Provisioned once, even when a lagging cache shows the machine
	// unprovisioned again.
	km := machine(infrav1.ReadyReason)
	if !s.FirstProvisioned(km, "snapshot", t0.Add(4*time.Second)) {
		t.Fatal("FirstProvisioned = false for the first time")
	}
	if s.FirstProvisioned(km, "snapshot", t0.Add(5*time.Second)) {
		t.Error("FirstProvisioned = true a second time")
	}

	// A provider restarted mid-stage does not time the stage it finds.
	restarted := &Keeper{}
	boot := stageCount(t, metrics.StageBoot)
	restarted.Track(machine(infrav1.BootingReason), machine(infrav1.BootingReason), outcome.Wait(infrav1.BootingReason, ""), t0)
	restarted.Track(machine(infrav1.BootingReason), machine(infrav1.ReadyReason), outcome.Wait(infrav1.WaitingForBootstrapReason, ""), t0.Add(time.Second))
	if got := stageCount(t, metrics.StageBoot) - boot; got != 0 {
		t.Errorf("boot observed %d times after a restart, want 0", got)
	}
	restarted.Forget(types.NamespacedName{Namespace: "progress", Name: "m"})
	s.Forget(types.NamespacedName{Namespace: "progress", Name: "m"})
}

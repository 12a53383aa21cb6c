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

package evacuation

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestNextMigrationStep(t *testing.T) {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	during, after := start.Add(time.Minute), start.Add(11*time.Minute)
	vmi := func(status corev1.ConditionStatus, state *kubevirtv1.VirtualMachineInstanceMigrationState) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{MigrationState: state}}
		if status != "" {
			v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: status}}
		}
		return v
	}
	fresh := infrav1.EvacuationStatus{StartTime: metav1.NewTime(start)}
	started := infrav1.EvacuationStatus{StartTime: metav1.NewTime(start), MigrationName: "m", MigrationUID: "uid-1"}
	abandoned := started
	abandoned.MigrationAbandoned = true
	for _, tt := range []struct {
		name    string
		ev      infrav1.EvacuationStatus
		vmi     *kubevirtv1.VirtualMachineInstance
		timeout time.Duration
		now     time.Time
		want    migrationStep
		wantWhy string
	}{
		{name: "migratable: start", ev: fresh, vmi: vmi(corev1.ConditionTrue, nil), timeout: 10 * time.Minute, now: during, want: migrationStart},
		{name: "not migratable: drain", ev: fresh, vmi: vmi(corev1.ConditionFalse, nil), timeout: 10 * time.Minute, now: during, want: migrationSkipped},
		{name: "not reported yet: drain", ev: fresh, vmi: vmi("", nil), timeout: 10 * time.Minute, now: during, want: migrationSkipped},
		{name: "switched off: drain", ev: fresh, vmi: vmi(corev1.ConditionTrue, nil), timeout: 0, now: during, want: migrationSkipped},
		{name: "too late to start: drain", ev: fresh, vmi: vmi(corev1.ConditionTrue, nil), timeout: 10 * time.Minute, now: after, want: migrationSkipped},
		{name: "started, not reported: wait", ev: started, vmi: vmi(corev1.ConditionTrue, nil), timeout: 10 * time.Minute, now: during, want: migrationWait},
		{name: "running: wait", ev: started, timeout: 10 * time.Minute, now: during, want: migrationWait,
			vmi: vmi(corev1.ConditionTrue, &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-1"})},
		{name: "completed: wait for KubeVirt to drop the request", ev: started, timeout: 10 * time.Minute, now: after, want: migrationWait,
			vmi: vmi(corev1.ConditionTrue, &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-1", Completed: true})},
		{name: "failed: abandon", ev: started, timeout: 10 * time.Minute, now: during, want: migrationAbandon, wantWhy: "failed: target pod unschedulable",
			vmi: vmi(corev1.ConditionTrue, &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-1", Failed: true, FailureReason: "target pod unschedulable"})},
		{name: "an earlier migration's failure does not count", ev: started, timeout: 10 * time.Minute, now: during, want: migrationWait,
			vmi: vmi(corev1.ConditionTrue, &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-0", Failed: true})},
		{name: "timed out: abandon", ev: started, vmi: vmi(corev1.ConditionTrue, nil), timeout: 10 * time.Minute, now: after, want: migrationAbandon,
			wantWhy: "did not complete within liveMigrationTimeoutSeconds (10m0s)"},
		{name: "abandoned: drain", ev: abandoned, vmi: vmi(corev1.ConditionTrue, nil), timeout: 10 * time.Minute, now: during, want: migrationSkipped},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, why := nextMigrationStep(&tt.ev, tt.vmi, tt.timeout, tt.now)
			if got != tt.want || why != tt.wantWhy {
				t.Errorf("nextMigrationStep = %v %q, want %v %q", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}

func TestMigrationUnderWay(t *testing.T) {
	started := infrav1.EvacuationStatus{MigrationUID: "uid-1"}
	abandoned := started
	abandoned.MigrationAbandoned = true
	state := func(uid string, completed, failed bool) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
			MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: types.UID(uid), Completed: completed, Failed: failed}}}
	}
	for _, tt := range []struct {
		name string
		ev   infrav1.EvacuationStatus
		vmi  *kubevirtv1.VirtualMachineInstance
		want bool
	}{
		{name: "taken over, not completed", ev: started, vmi: state("uid-1", false, false), want: true},
		{name: "completed", ev: started, vmi: state("uid-1", true, false)},
		{name: "failed", ev: started, vmi: state("uid-1", false, true)},
		{name: "another migration", ev: started, vmi: state("uid-2", false, false)},
		{name: "abandoned", ev: abandoned, vmi: state("uid-1", false, false)},
		{name: "none started", ev: infrav1.EvacuationStatus{}, vmi: state("uid-1", false, false)},
		{name: "no state", ev: started, vmi: &kubevirtv1.VirtualMachineInstance{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := migrationUnderWay(tt.vmi, &tt.ev); got != tt.want {
				t.Errorf("migrationUnderWay = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMigrationReportDue(t *testing.T) {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	km := &infrav1.KubevirtMachine{}
	ev := &infrav1.EvacuationStatus{StartTime: metav1.NewTime(start), MigrationUID: "uid-1"}
	running := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-1"}}}
	if got := migrationReportDue(km, running, ev, start.Add(time.Minute)); got != 9*time.Minute {
		t.Errorf("within the default 600s timeout: wait %s, want 9m", got)
	}
	if got := migrationReportDue(km, running, ev, start.Add(11*time.Minute)); got != 0 {
		t.Errorf("past the timeout: wait %s, want 0", got)
	}
	done := running.DeepCopy()
	done.Status.MigrationState.Completed = true
	if got := migrationReportDue(km, done, ev, start.Add(time.Minute)); got != 0 {
		t.Errorf("completed: wait %s, want 0", got)
	}
}

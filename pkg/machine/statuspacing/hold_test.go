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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

func TestSettleStep(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	settle := 10 * time.Second
	tests := []struct {
		name        string
		pending     pendingStatus
		seen        bool
		step        string
		now         time.Time
		wantWait    time.Duration
		wantSince   time.Time
		wantWritten int
	}{
		{name: "a first step is held for the settle time", step: "a", now: t0, wantWait: settle, wantSince: t0},
		{name: "a new step starts over", pending: pendingStatus{step: "a", since: t0}, seen: true, step: "b",
			now: t0.Add(9 * time.Second), wantWait: settle, wantSince: t0.Add(9 * time.Second)},
		{name: "the same step waits for the rest", pending: pendingStatus{step: "a", since: t0}, seen: true, step: "a",
			now: t0.Add(4 * time.Second), wantWait: 6 * time.Second, wantSince: t0},
		{name: "a step that lasted is written and waits again for later changes", pending: pendingStatus{step: "a", since: t0}, seen: true, step: "a",
			now: t0.Add(settle), wantWait: 0, wantSince: t0.Add(settle), wantWritten: 1},
		{name: "progress within a written step waits twice as long", pending: pendingStatus{step: "a", since: t0, written: 1}, seen: true, step: "a",
			now: t0.Add(settle), wantWait: settle, wantSince: t0, wantWritten: 1},
		{name: "and is written once that has passed", pending: pendingStatus{step: "a", since: t0, written: 1}, seen: true, step: "a",
			now: t0.Add(2 * settle), wantWait: 0, wantSince: t0.Add(2 * settle), wantWritten: 2},
		{name: "the hold stops doubling at two settle times", pending: pendingStatus{step: "a", since: t0, written: 7}, seen: true, step: "a",
			now: t0.Add(settle), wantWait: settle, wantSince: t0, wantWritten: 7},
		{name: "a new step after written ones starts over at the settle time", pending: pendingStatus{step: "a", since: t0, written: 3}, seen: true, step: "b",
			now: t0.Add(time.Second), wantWait: settle, wantSince: t0.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, wait := settleStep(tt.pending, tt.seen, tt.step, tt.now, settle)
			if wait != tt.wantWait || !next.since.Equal(tt.wantSince) || next.step != tt.step || next.written != tt.wantWritten {
				t.Errorf("settleStep = (%+v, %s), want wait %s since %s written %d", next, wait, tt.wantWait, tt.wantSince, tt.wantWritten)
			}
		})
	}
}

func TestHoldStatus(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	machine := func(reason string, mutate ...func(*infrav1.KubevirtMachine)) *infrav1.KubevirtMachine {
		km := &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
		if reason != "" {
			conditions.Set(km, metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionFalse, Reason: reason})
		}
		for _, m := range mutate {
			m(km)
		}
		return km
	}
	isProvisioned := func(km *infrav1.KubevirtMachine) { km.Status.Initialization.Provisioned = ptr.To(true) }
	deleting := func(km *infrav1.KubevirtMachine) { km.DeletionTimestamp = &metav1.Time{Time: now} }
	tests := []struct {
		name   string
		stored *infrav1.KubevirtMachine
		now    *infrav1.KubevirtMachine
		o      outcome.Outcome
		held   bool
	}{
		{name: "a provisioning step is held", stored: machine(infrav1.WaitingForBootstrapDataReason), now: machine(infrav1.PendingReason),
			o: outcome.Wait(infrav1.PendingReason, ""), held: true},
		{name: "the first status is held too", stored: machine(""), now: machine(infrav1.WaitingForOwnerReason),
			o: outcome.Wait(infrav1.WaitingForOwnerReason, ""), held: true},
		{name: "a failure is written at once", stored: machine(infrav1.PendingReason), now: machine(infrav1.UnschedulableReason),
			o: outcome.Fail(infrav1.UnschedulableReason, "")},
		{name: "provisioning is written at once", stored: machine(infrav1.PendingReason), now: machine(infrav1.PendingReason, isProvisioned), o: outcome.Ready("", "")},
		{name: "a provisioned machine's changes are written at once", stored: machine(infrav1.PendingReason, isProvisioned),
			now: machine(infrav1.BootingReason, isProvisioned), o: outcome.Wait(infrav1.BootingReason, "")},
		{name: "a deleting machine's changes are written at once", stored: machine(infrav1.PendingReason),
			now: machine(infrav1.DeletingReason, deleting), o: outcome.Wait(infrav1.DeletingReason, "")},
		{name: "nothing changed, nothing held", stored: machine(infrav1.PendingReason), now: machine(infrav1.PendingReason), o: outcome.Wait(infrav1.PendingReason, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Keeper{SettleTime: 10 * time.Second}
			if got := s.Hold(tt.stored, tt.now, tt.o, now); (got > 0) != tt.held {
				t.Errorf("Hold = %s, want held %v", got, tt.held)
			}
		})
	}
	t.Run("a step held for the settle time is written", func(t *testing.T) {
		s := &Keeper{SettleTime: 10 * time.Second}
		stored, km := machine(infrav1.PendingReason), machine(infrav1.BootingReason)
		o := outcome.Wait(infrav1.BootingReason, "")
		if got := s.Hold(stored, km, o, now); got != 10*time.Second {
			t.Fatalf("first look: Hold = %s, want 10s", got)
		}
		if got := s.Hold(stored, km, o, now.Add(3*time.Second)); got != 7*time.Second {
			t.Fatalf("3s later: Hold = %s, want 7s", got)
		}
		if got := s.Hold(stored, km, o, now.Add(10*time.Second)); got != 0 {
			t.Fatalf("10s later: Hold = %s, want 0 (write)", got)
		}
	})
	t.Run("a step that must be stored is written at once, once", func(t *testing.T) {
		s := &Keeper{SettleTime: 10 * time.Second}
		stored, km := machine(infrav1.WaitingForBootstrapDataReason), machine(infrav1.WaitingForGoldenImageReason)
		o := outcome.Wait(infrav1.WaitingForGoldenImageReason, "")
		s.WriteNow(types.NamespacedName{Namespace: "ns", Name: "m"})
		if got := s.Hold(stored, km, o, now); got != 0 {
			t.Fatalf("Hold = %s, want 0 (write)", got)
		}
		if got := s.Hold(stored, km, o, now); got == 0 {
			t.Errorf("the next change: Hold = 0, want it held")
		}
	})
	t.Run("the end of a failure is written at once", func(t *testing.T) {
		s := &Keeper{SettleTime: 10 * time.Second}
		failed := machine(infrav1.KubeVirtNotInstalledReason)
		if got := s.Hold(machine(infrav1.PendingReason), failed, outcome.Fail(infrav1.KubeVirtNotInstalledReason, ""), now); got != 0 {
			t.Fatalf("the failure: Hold = %s, want 0", got)
		}
		if got := s.Hold(failed, machine(infrav1.WaitingForBootstrapDataReason), outcome.Wait(infrav1.WaitingForBootstrapDataReason, ""), now); got != 0 {
			t.Fatalf("its end: Hold = %s, want 0", got)
		}
		if got := s.Hold(machine(infrav1.WaitingForBootstrapDataReason), machine(infrav1.PendingReason), outcome.Wait(infrav1.PendingReason, ""), now); got == 0 {
			t.Errorf("the next step: Hold = 0, want it held")
		}
	})
	t.Run("a negative settle time writes every step", func(t *testing.T) {
		s := &Keeper{SettleTime: -1}
		if got := s.Hold(machine(""), machine(infrav1.PendingReason), outcome.Wait(infrav1.PendingReason, ""), now); got != 0 {
			t.Errorf("Hold = %s, want 0", got)
		}
	})
}

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

// Package statuspacing decides, where a KubevirtMachine's status is
// written, when to write it (holding back the short steps of a machine
// still provisioning), and times each machine's provisioning stages for the
// metrics. What it keeps is in memory only.
package statuspacing

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// DefaultStatusSettleTime is how long a provisioning machine's status must
// stay at one step before it is written. KubeVirt alone keeps a VM at one
// step for up to about a minute when a hundred VMs arrive at once (its
// virt-controller creating the disks, docs/benchmark.md#the-plateau), and
// a worker waits for its control plane about as long: steps that long are
// normal and nobody acts on them, while a failure or a warning is written
// at once.
const DefaultStatusSettleTime = 2 * time.Minute

// Keeper holds back status writes and times stages for every
// KubevirtMachine of the manager.
type Keeper struct {
	// SettleTime is how long a provisioning machine's status must stay at
	// one step before it is written (Hold); zero is
	// DefaultStatusSettleTime, negative writes every step.
	SettleTime time.Duration

	holds    statusHold
	progress progress
}

// statusHold keeps back the status writes of machines that are still
// provisioning. A VM passes through many steps on its way (root disk
// cloning, scheduled, running, booting) and most last a moment; writing
// each costs the management cluster a write per step and machine, and
// nobody acts on a step that is over before they look. A step is written
// once it has lasted the settle time, so a machine stuck at any step still
// says why. A failure and its end, provisioning itself and anything after
// it are written at once, and so is what a step must store before the
// machine goes on (writeNow): a claim on a golden volume no template claims
// yet. What it holds is in memory only: a restarted provider
// simply writes what it finds.
type statusHold struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]pendingStatus
	// now are the machines whose next status must be stored before they
	// go on.
	now map[types.NamespacedName]bool
	// failing are the machines whose last written status was a failure:
	// the end of a failure is written at once too.
	failing map[types.NamespacedName]bool
}

// pendingStatus is the step a machine's unwritten status shows, since
// when (first seen, or last written), and how often it was written.
type pendingStatus struct {
	step    string
	since   time.Time
	written int
}

// maxSettleDoublings caps how long progress within one step is held: the
// settle time doubled at most this often (2 minutes, then 4).
const maxSettleDoublings = 1

// Hold reports how long to keep back the status computed for km
// (zero: write it now), given the status last written (stored) and the
// outcome of the reconcile. Holding requeues the machine for when the
// settle time ends, so a held step is written even if nothing else
// happens.
func (s *Keeper) Hold(stored, km *infrav1.KubevirtMachine, o outcome.Outcome, now time.Time) time.Duration {
	key := types.NamespacedName{Namespace: km.Namespace, Name: km.Name}
	settle := s.SettleTime
	if settle == 0 {
		settle = DefaultStatusSettleTime
	}
	if settle < 0 || !km.DeletionTimestamp.IsZero() || provisioned(stored) || provisioned(km) {
		s.holds.forget(key)
		return 0
	}
	if o.State == outcome.Failed {
		s.holds.forget(key)
		s.holds.mark(key, &s.holds.failing)
		return 0
	}
	// Both are taken, whichever decides.
	mustStore, recovered := s.holds.take(key, &s.holds.now), s.holds.take(key, &s.holds.failing)
	if mustStore || recovered {
		s.holds.forget(key)
		return 0
	}
	if equality.Semantic.DeepEqual(stored.Status, km.Status) {
		s.holds.forget(key)
		return 0
	}
	return s.holds.decide(key, stepOf(km), now, settle)
}

// Forget drops what is held and tracked for a machine that is gone.
func (s *Keeper) Forget(key types.NamespacedName) {
	s.holds.forget(key)
	s.progress.forget(key)
}

func (h *statusHold) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, key)
	delete(h.now, key)
	delete(h.failing, key)
}

// WriteNow marks the machine's status to be written at the end of this
// reconcile, whatever step it shows: what it stores must be saved before
// the machine goes on.
func (s *Keeper) WriteNow(key types.NamespacedName) { s.holds.mark(key, &s.holds.now) }

func (h *statusHold) mark(key types.NamespacedName, set *map[types.NamespacedName]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *set == nil {
		*set = map[types.NamespacedName]bool{}
	}
	(*set)[key] = true
}

func (h *statusHold) take(key types.NamespacedName, set *map[types.NamespacedName]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	marked := (*set)[key]
	delete(*set, key)
	return marked
}

func (h *statusHold) decide(key types.NamespacedName, step string, now time.Time, settle time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[types.NamespacedName]pendingStatus{}
	}
	p, ok := h.pending[key]
	next, wait := settleStep(p, ok, step, now, settle)
	h.pending[key] = next
	return wait
}

// settleStep decides on one status change: a new step is held for the
// settle time; a step seen for that long is written (wait zero). Later
// changes within the same step, such as progress messages or the phases
// of a clone that CDI queues, wait twice as long each time: the first
// write told why the machine waits, and a hundred machines cloning for
// minutes would otherwise write their progress every settle time.
func settleStep(p pendingStatus, seen bool, step string, now time.Time, settle time.Duration) (pendingStatus, time.Duration) {
	if !seen || p.step != step {
		return pendingStatus{step: step, since: now}, settle
	}
	hold := settle << min(p.written, maxSettleDoublings)
	if lasted := now.Sub(p.since); lasted < hold {
		return p, hold - lasted
	}
	return pendingStatus{step: step, since: now, written: p.written + 1}, 0
}

func provisioned(km *infrav1.KubevirtMachine) bool {
	return ptr.Deref(km.Status.Initialization.Provisioned, false)
}

// stepOf names the step a machine's status shows: the status and reason of
// each condition. Messages are left out, as they carry progress.
func stepOf(km *infrav1.KubevirtMachine) string {
	var b strings.Builder
	for _, c := range km.Status.Conditions {
		b.WriteString(c.Type + "=" + string(c.Status) + "/" + c.Reason + ";")
	}
	return b.String()
}

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

// Package outcome is how a service tells its controller what a reconcile
// achieved: done, waiting for something with a reason, waiting for a time,
// or failed until the user acts. The controller turns it into a result and
// never reads conditions back to find out. Set, Record and RecordWarning
// are the one place that sets a condition from an outcome and records its
// Events; Sooner is the one rule for combining requeue delays.
package outcome

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// State is where a reconcile left its object.
type State string

const (
	// Done: the object reached what was asked of it.
	Done State = "Done"
	// Waiting: something is under way or missing; an event, or the
	// RequeueAfter of the outcome, ends the wait.
	Waiting State = "Waiting"
	// Failed: the user must change something; a watch on what they would
	// change, or RequeueAfter, triggers the next try.
	Failed State = "Failed"
)

// Outcome is what a reconcile step achieved.
type Outcome struct {
	State State
	// Reason and Message become the condition the step owns.
	Reason  string
	Message string
	// RequeueAfter is set when nothing watched announces the end of the
	// wait: a remote check, an unreachable API.
	RequeueAfter time.Duration
}

// Ready is a Done outcome.
func Ready(reason, message string) Outcome {
	return Outcome{State: Done, Reason: reason, Message: message}
}

// Wait is a Waiting outcome.
func Wait(reason, message string) Outcome {
	return Outcome{State: Waiting, Reason: reason, Message: message}
}

// Fail is a Failed outcome.
func Fail(reason, message string) Outcome {
	return Outcome{State: Failed, Reason: reason, Message: message}
}

// After returns o to be looked at again after d.
func (o Outcome) After(d time.Duration) Outcome {
	o.RequeueAfter = d
	return o
}

// Sooner is the earlier of two requeue delays, zero meaning none: the one
// rule by which every reconcile combines the waits of its steps.
func Sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// DefaultRecheck is how soon a service looks again at what no event
// announces (a remote check, a permission, an API the infra cluster does not
// serve yet) when nothing else is configured.
const DefaultRecheck = 10 * time.Second

// Recheck is the configured recheck delay, else DefaultRecheck.
func Recheck(configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return DefaultRecheck
}

// IsDone reports whether the step is done.
func (o Outcome) IsDone() bool { return o.State == Done }

// Result is the controller-runtime result of o.
func (o Outcome) Result() ctrl.Result { return ctrl.Result{RequeueAfter: o.RequeueAfter} }

// Condition is o as a condition of type t: True when done, else False.
func (o Outcome) Condition(t string) metav1.Condition {
	status := metav1.ConditionFalse
	if o.IsDone() {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: status, Reason: o.Reason, Message: o.Message}
}

// Object is a CAPKV object with conditions.
type Object interface {
	client.Object
	conditions.Setter
}

// Set sets condition t of obj from o, without an Event: for conditions
// whose every change is a step the object goes through anyway (deleting,
// waiting for an owner, a template's capacity).
func Set(obj Object, t string, o Outcome) {
	conditions.Set(obj, o.Condition(t))
}

// Record sets condition t of obj from o, and records an Event when the
// condition's status or reason changes: a Warning for a failure, else
// Normal. Messages carry no Secret content, so they are safe in Events.
func Record(recorder events.EventRecorder, obj Object, t string, o Outcome) {
	record(recorder, obj, t, o, true)
}

// RecordWarning is Record for steps whose progress only the condition
// tells: it records an Event only when the step fails. An Event for every
// step of every machine is a write each, where a person looks for the
// failures (and for the few transitions the caller records itself).
func RecordWarning(recorder events.EventRecorder, obj Object, t string, o Outcome) {
	record(recorder, obj, t, o, false)
}

func record(recorder events.EventRecorder, obj Object, t string, o Outcome, normal bool) {
	c := o.Condition(t)
	if prev := conditions.Get(obj, t); prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
		switch {
		case o.State == Failed:
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, c.Reason, "Reconcile"+t, "%s", c.Message)
		case normal:
			recorder.Eventf(obj, nil, corev1.EventTypeNormal, c.Reason, "Reconcile"+t, "%s", c.Message)
		}
	}
	conditions.Set(obj, c)
}

// Merge combines the outcomes of independent steps: done only when all are;
// otherwise the first failure, else the first wait. It requeues at the
// soonest time any of them asked for.
func Merge(outcomes ...Outcome) Outcome {
	var first *Outcome
	var requeue time.Duration
	for i := range outcomes {
		o := &outcomes[i]
		requeue = Sooner(requeue, o.RequeueAfter)
		switch {
		case o.IsDone():
		case first == nil, first.State == Waiting && o.State == Failed:
			first = o
		}
	}
	if first == nil {
		if len(outcomes) == 0 {
			return Ready("", "")
		}
		return outcomes[0].After(requeue)
	}
	return first.After(requeue)
}

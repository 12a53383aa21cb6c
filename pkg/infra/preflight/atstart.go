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

package preflight

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AtStart runs the preflight's read-only checks once when the manager
// starts (the leader), against the management cluster as the local infra
// cluster: it logs every finding and records each Warning and Error as an
// Event on the manager's Pod. A management cluster without KubeVirt
// (every infra cluster external) is skipped.
type AtStart struct {
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	Recorder  events.EventRecorder
	// Pod is the manager's own Pod; nil records no Events.
	Pod *corev1.Pod
}

// Start implements manager.Runnable.
func (a *AtStart) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("preflight")
	if !servedAPIs(a.Discovery).Has(kubeVirtAPI) {
		log.Info("the management cluster serves no KubeVirt: no preflight at start; run `manager preflight` against each infra cluster")
		return nil
	}
	report := Run(ctx, a.Client, a.Discovery, Options{})
	for _, f := range report.Findings {
		log.Info(f.Message, "check", f.Check, "severity", f.Severity, "reason", f.Reason)
	}
	if a.Pod == nil {
		return nil
	}
	// The events recorder folds Events of one object, reason and action
	// into a series that keeps the first note: one Event per reason says
	// every finding of it.
	var reasons []string
	notes := map[string][]string{}
	for _, f := range report.Problems() {
		if notes[f.Reason] == nil {
			reasons = append(reasons, f.Reason)
		}
		notes[f.Reason] = append(notes[f.Reason], f.Check+": "+f.Message)
	}
	for _, reason := range reasons {
		a.Recorder.Eventf(a.Pod, nil, corev1.EventTypeWarning, reason, "Preflight", "%s", note(strings.Join(notes[reason], "; ")))
	}
	return nil
}

// maxNote is the longest note an events.k8s.io/v1 Event takes.
const maxNote = 1024

// note cuts a note to what an Event takes.
func note(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const more = " (...)"
	return s[:maxNote-len(more)] + more
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica reports.
func (a *AtStart) NeedLeaderElection() bool { return true }

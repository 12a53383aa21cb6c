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

// Package remediation is what the KubevirtRemediation controller does:
// Cluster API external remediation that restarts the VM of an unhealthy
// Machine instead of replacing the Machine. It asks the KubevirtMachine
// controller for a restart through the restart-requested-at annotation,
// waits for the MachineHealthCheck to find the Machine healthy, restarts
// again up to the retry limit, and then hands the Machine back to its
// owner (MachineSet or KubeadmControlPlane) by setting the Machine's
// OwnerRemediated condition to False, which is what makes the owner
// delete and replace it.
package remediation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// Service remediates Machines by restarting their VMs.
type Service struct {
	// Client writes the KubevirtMachine's annotation and the Machine's
	// conditions.
	Client client.Client
	// Recorder records an Event on the KubevirtRemediation for each
	// restart and for giving up.
	Recorder events.EventRecorder
}

// Scope is one remediation and the objects it acts on.
type Scope struct {
	// Remediation is the KubevirtRemediation; the service sets its status,
	// the caller saves it.
	Remediation *infrav1.KubevirtRemediation
	// Machine is the Machine being remediated; nil when it does not exist.
	Machine *clusterv1.Machine
	// KubevirtMachine is the Machine's infrastructure; nil when it does
	// not exist or is not a KubevirtMachine.
	KubevirtMachine *infrav1.KubevirtMachine
}

// Reconcile takes the next step of a remediation and records it in its
// status. The outcome's RequeueAfter is when the current restart times
// out.
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	rem := sc.Remediation
	now := time.Now()
	d := decide(rem, sc.Machine, sc.KubevirtMachine, now)
	switch d.step {
	case waitForMachine:
		if rem.Status.Phase == "" {
			rem.Status.Phase = infrav1.RemediationPhaseRemediating
		}
		s.setCondition(rem, metav1.ConditionFalse, infrav1.WaitingForMachineReason, d.why+"; nothing restarted yet", false)
		return outcome.Wait(infrav1.WaitingForMachineReason, d.why), nil
	case wait:
		return outcome.Wait(infrav1.RestartedVirtualMachineReason, "waiting for the Machine to become healthy").After(d.after), nil
	case restart:
		return s.restart(ctx, sc, now)
	case refuse:
		return s.fail(ctx, sc, infrav1.NotRestartableReason, d.why)
	case giveUp:
		return s.fail(ctx, sc, infrav1.RetryLimitReachedReason, d.why)
	default: // stayFailed
		// Handed back before; hand back again should the condition have
		// been lost (a failed patch, a restored Machine).
		last := ptr.Deref(conditions.Get(rem, infrav1.RemediatingCondition), metav1.Condition{Reason: infrav1.RetryLimitReachedReason})
		return outcome.Fail(last.Reason, last.Message), s.markMachine(ctx, sc.Machine, rem, last.Reason, last.Message, true)
	}
}

// restart asks the KubevirtMachine controller to restart the VM, by
// setting the restart-requested-at annotation to now, and counts it.
func (s *Service) restart(ctx context.Context, sc *Scope, now time.Time) (outcome.Outcome, error) {
	rem, km := sc.Remediation, sc.KubevirtMachine
	at := metav1.NewTime(now.Truncate(time.Second))
	value := at.UTC().Format(time.RFC3339)
	if err := s.annotate(ctx, km, value); err != nil {
		return outcome.Outcome{}, err
	}
	rem.Status.RetryCount++
	rem.Status.LastRemediated = at
	rem.Status.Phase = infrav1.RemediationPhaseWaiting
	timeout := timeoutSeconds(rem)
	msg := fmt.Sprintf("restart %d of %d: asked for the VirtualMachine of KubevirtMachine %s to restart at %s; waiting up to %ds for Machine %s to become healthy",
		rem.Status.RetryCount, retryLimit(rem), km.Name, value, timeout, sc.Machine.Name)
	s.setCondition(rem, metav1.ConditionTrue, infrav1.RestartedVirtualMachineReason, msg, true)
	o := outcome.Wait(infrav1.RestartedVirtualMachineReason, msg).After(time.Duration(timeout) * time.Second)
	// The restart is requested and counted (the caller saves the count
	// even on an error), so a failure here never causes a second restart.
	return o, s.markMachine(ctx, sc.Machine, rem, infrav1.RestartedVirtualMachineReason, msg, false)
}

// annotate sets the restart request on the KubevirtMachine with a merge
// patch of that one annotation, so nothing else of it is touched.
func (s *Service) annotate(ctx context.Context, km *infrav1.KubevirtMachine, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{infrav1.RestartRequestedAnnotation: value}}})
	if err != nil {
		return err
	}
	target := &infrav1.KubevirtMachine{}
	target.Namespace, target.Name = km.Namespace, km.Name
	if err := s.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("requesting a restart of KubevirtMachine %s/%s: %w", km.Namespace, km.Name, err)
	}
	return nil
}

// fail hands the Machine back to its owner and marks the remediation
// Failed.
func (s *Service) fail(ctx context.Context, sc *Scope, reason, why string) (outcome.Outcome, error) {
	rem := sc.Remediation
	msg := why + "; handed Machine " + sc.Machine.Name + " back to its owner to be replaced"
	if err := s.markMachine(ctx, sc.Machine, rem, reason, msg, true); err != nil {
		return outcome.Outcome{}, err
	}
	rem.Status.Phase = infrav1.RemediationPhaseFailed
	s.setCondition(rem, metav1.ConditionFalse, reason, msg, false)
	return outcome.Fail(reason, msg), nil
}

// markMachine tells on the Machine where its remediation stands, in the
// ExternallyRemediated condition: the MachineHealthCheck sets it to False
// with reason WaitingForRemediation when it creates the remediation, and
// leaves it to the remediation controller. It stays False with the
// remediation's reason and message.
//
// With handOver it also sets the Machine's OwnerRemediated condition to
// False with reason WaitingForRemediation, in the v1beta2 conditions and the
// deprecated v1beta1 ones, as the MachineHealthCheck does for Machines
// without external remediation: MachineSets and KubeadmControlPlanes
// delete, and so replace, Machines whose HealthCheckSucceeded and
// OwnerRemediated conditions are both False. An OwnerRemediated condition
// the owner already set to False (it is working on it) is left alone, and
// a Machine that is healthy again is not handed back. A Machine going away
// is left alone altogether.
func (s *Service) markMachine(ctx context.Context, m *clusterv1.Machine, rem *infrav1.KubevirtRemediation, reason, message string, handOver bool) error {
	if m == nil || !m.DeletionTimestamp.IsZero() {
		return nil
	}
	message = fmt.Sprintf("KubevirtRemediation %s: %s", rem.Name, message)
	external := metav1.Condition{Type: clusterv1.MachineExternallyRemediatedCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	setExternal := !sameCondition(conditions.Get(m, external.Type), external)
	setV1Beta2, setV1Beta1 := false, false
	if handOver && !conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition) {
		current := conditions.Get(m, clusterv1.MachineOwnerRemediatedCondition)
		setV1Beta2 = current == nil || current.Status == metav1.ConditionTrue
		setV1Beta1 = !v1beta1conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedV1Beta1Condition)
	}
	if !setExternal && !setV1Beta2 && !setV1Beta1 {
		return nil
	}
	helper, err := patch.NewHelper(m, s.Client)
	if err != nil {
		return err
	}
	if setExternal {
		conditions.Set(m, external)
	}
	if setV1Beta2 {
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason, Message: message})
	}
	if setV1Beta1 {
		v1beta1conditions.MarkFalse(m, clusterv1.MachineOwnerRemediatedV1Beta1Condition, clusterv1.WaitingForRemediationV1Beta1Reason,
			clusterv1.ConditionSeverityWarning, "%s", message)
	}
	if err := helper.Patch(ctx, m,
		patch.WithOwnedConditions{Conditions: []string{clusterv1.MachineExternallyRemediatedCondition, clusterv1.MachineOwnerRemediatedCondition}},
		//nolint:staticcheck // the deprecated v1beta1 condition, kept for readers of the v1beta1 API
		patch.WithOwnedV1Beta1Conditions{Conditions: []clusterv1.ConditionType{clusterv1.MachineOwnerRemediatedV1Beta1Condition}},
	); err != nil {
		return fmt.Errorf("setting the remediation conditions of Machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

func sameCondition(c *metav1.Condition, want metav1.Condition) bool {
	return c != nil && c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message
}

// setCondition sets the Remediating condition, and records an Event when
// its status or reason changes, or always when asked (one per restart).
// Failures are Warnings.
func (s *Service) setCondition(rem *infrav1.KubevirtRemediation, status metav1.ConditionStatus, reason, message string, always bool) {
	prev := conditions.Get(rem, infrav1.RemediatingCondition)
	if always || prev == nil || prev.Status != status || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if reason == infrav1.RetryLimitReachedReason || reason == infrav1.NotRestartableReason {
			eventType = corev1.EventTypeWarning
		}
		s.Recorder.Eventf(rem, nil, eventType, reason, "Remediate", "%s", message)
	}
	conditions.Set(rem, metav1.Condition{Type: infrav1.RemediatingCondition, Status: status, Reason: reason, Message: message})
}

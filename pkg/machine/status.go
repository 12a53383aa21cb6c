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

// This file sets the KubevirtMachine conditions the machine service owns
// (VirtualMachineReady, BootstrapSucceeded, NodeJoined, InPlaceUpdated,
// and LiveMigratable, Migrating and Evacuating for the evacuation): the
// phases decide the outcome, and only these functions write it, and
// Ready, summarized for the controller (docs/status_test.go holds it).
// InfraClusterAvailable and Paused are set as for every kind, by the
// controller's shared helpers.

package machine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// provisioned says whether the stored status calls the machine
// provisioned.
func provisioned(km *infrav1.KubevirtMachine) bool {
	return ptr.Deref(km.Status.Initialization.Provisioned, false)
}

// recordVM sets the VirtualMachineReady condition from o, with an Event
// when it changes, and returns o.
func (s *Service) recordVM(km *infrav1.KubevirtMachine, o outcome.Outcome) outcome.Outcome {
	outcome.RecordWarning(s.Recorder, km, infrav1.VirtualMachineReadyCondition, o)
	return o
}

// recordInPlace sets InPlaceUpdated from o, with an Event when it
// changes.
func (s *Service) recordInPlace(km *infrav1.KubevirtMachine, o outcome.Outcome) {
	outcome.Record(s.Recorder, km, infrav1.InPlaceUpdatedCondition, o)
}

// recordNodeJoin sets NodeJoined from o, with an Event (a warning when it
// is one) when it changes, and returns o.
func (s *Service) recordNodeJoin(km *infrav1.KubevirtMachine, o outcome.Outcome) outcome.Outcome {
	outcome.RecordWarning(s.Recorder, km, infrav1.NodeJoinedCondition, o)
	return o
}

// setBootstrap sets BootstrapSucceeded.
func setBootstrap(km *infrav1.KubevirtMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(km, metav1.Condition{Type: infrav1.BootstrapSucceededCondition, Status: status, Reason: reason, Message: message})
}

// markNotProvisioned reports a machine whose VM is gone or failed its
// bootstrap as not ready, unless it was provisioned before.
func markNotProvisioned(km *infrav1.KubevirtMachine) {
	// Once provisioned, a machine stays provisioned for CAPI (the contract
	// does not go back); readiness is carried by the Ready condition.
	if !provisioned(km) {
		km.Status.Ready = false
	}
}

// recordMigration mirrors what KubeVirt says of live migration onto the
// machine: whether the instance can migrate, and how its last migration
// went, with an Event when either changes. Until KubeVirt reports one, the
// condition is left as it is, so that an instance being replaced does not
// make the machine's status flap.
func (s *Service) recordMigration(km *infrav1.KubevirtMachine, vmi *kubevirtv1.VirtualMachineInstance) {
	if vmi == nil {
		return
	}
	if c, ok := vmstatus.LiveMigratable(vmi); ok {
		conditions.Set(km, c)
	}
	c, ok := vmstatus.Migration(vmi)
	if !ok {
		return
	}
	if prev := conditions.Get(km, infrav1.MigratingCondition); prev != nil && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
		return
	}
	conditions.Set(km, c)
	eventType := corev1.EventTypeNormal
	if c.Reason == infrav1.MigrationFailedReason {
		eventType = corev1.EventTypeWarning
	}
	s.Recorder.Eventf(km, vmi, eventType, c.Reason, "LiveMigrate", "%s", c.Message)
}

// recordEvacuating returns what sets the machine's Evacuating condition
// for the evacuation, with an Event when its status or reason changes (a
// warning for a tenant drain the API blocks).
func (s *Service) recordEvacuating(km *infrav1.KubevirtMachine) func(metav1.ConditionStatus, string, string) {
	return func(status metav1.ConditionStatus, reason, message string) {
		if c := conditions.Get(km, infrav1.EvacuatingCondition); c == nil || c.Status != status || c.Reason != reason {
			eventType := corev1.EventTypeNormal
			if reason == infrav1.TenantDrainBlockedReason {
				eventType = corev1.EventTypeWarning
			}
			s.Recorder.Eventf(km, nil, eventType, reason, "Evacuate", "%s", message)
		}
		conditions.Set(km, metav1.Condition{Type: infrav1.EvacuatingCondition, Status: status, Reason: reason, Message: message})
	}
}

// Summarize sets Ready from the other conditions with Cluster API's
// default merge strategy and its generic reasons. Once the machine is
// provisioned, an infra API outage does not make it unready: its VM keeps
// running, and a MachineHealthCheck acting on Ready would otherwise replace
// every machine at once.
func Summarize(km *infrav1.KubevirtMachine) {
	summarized := []string{infrav1.InfraClusterAvailableCondition, infrav1.VirtualMachineReadyCondition, infrav1.BootstrapSucceededCondition}
	if provisioned(km) && km.DeletionTimestamp.IsZero() {
		summarized = summarized[1:]
	}
	outcome.Summarize(km, summarized)
}

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

// This file writes the KubevirtMachine status the machine service owns:
// the conditions VirtualMachineReady, BootstrapSucceeded, NodeJoined,
// InPlaceUpdated, and LiveMigratable, Migrating and Evacuating for the
// evacuation, and the ready, provisioned, address and failure domain
// fields. The phases record what they found in the run's findings; only
// writeStatus writes them, once the phases are done. The controller sets
// InfraClusterAvailable, Paused and Ready through the exported functions
// below (docs/status_test.go holds it).

package machine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/evacuation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// provisioned says whether the stored status calls the machine
// provisioned.
func provisioned(km *infrav1.KubevirtMachine) bool {
	return ptr.Deref(km.Status.Initialization.Provisioned, false)
}

// findings is what a reconcile's phases found that the machine's status
// reports; a nil or false field leaves its part of the status as it is.
type findings struct {
	// vm is VirtualMachineReady.
	vm *outcome.Outcome
	// bootstrap is BootstrapSucceeded.
	bootstrap *outcome.Outcome
	// notReady is a VM gone, or not running and bootstrapped yet: the
	// machine is not ready, unless it was provisioned before.
	notReady bool
	// provisioned is a VM running and bootstrapped.
	provisioned bool
	// addresses are the running instance's; failureDomain is the
	// Machine's, once the instance is placed.
	addresses     []clusterv1.MachineAddress
	failureDomain *string
	// migration is the instance whose live migration state the machine
	// mirrors.
	migration *kubevirtv1.VirtualMachineInstance
	// evacuating is where the evacuation stood, at each of its steps.
	evacuating evacuation.Steps
	// inPlace is InPlaceUpdated, nodeJoin NodeJoined.
	inPlace  *outcome.Outcome
	nodeJoin *outcome.Outcome
}

// writeStatus writes what the phases found into the machine's status, with
// an Event where a condition changes as its setter below says, in the
// order of the phases that find them: the instance's (migration,
// evacuation), the in-place update's, then the report's. Events a phase
// records itself (a live migration abandoned, Provisioned) come before
// these.
func (s *Service) writeStatus(km *infrav1.KubevirtMachine, f *findings) {
	s.recordMigration(km, f.migration)
	for _, c := range f.evacuating {
		s.recordEvacuating(km, c)
	}
	if f.inPlace != nil {
		outcome.Record(s.Recorder, km, infrav1.InPlaceUpdatedCondition, *f.inPlace)
	}
	if f.addresses != nil {
		km.Status.Addresses = f.addresses
	}
	if f.vm != nil {
		// An Event only when it fails.
		outcome.RecordWarning(s.Recorder, km, infrav1.VirtualMachineReadyCondition, *f.vm)
	}
	if f.failureDomain != nil {
		km.Status.FailureDomain = *f.failureDomain
	}
	if f.bootstrap != nil {
		conditions.Set(km, f.bootstrap.Condition(infrav1.BootstrapSucceededCondition))
	}
	// Once provisioned, a machine stays provisioned for CAPI (the contract
	// does not go back); readiness is carried by the Ready condition.
	if f.notReady && !provisioned(km) {
		km.Status.Ready = false
	}
	if f.provisioned {
		km.Status.Ready = true
		km.Status.Initialization.Provisioned = ptr.To(true)
	}
	if f.nodeJoin != nil {
		// A warning Event when it is one.
		outcome.RecordWarning(s.Recorder, km, infrav1.NodeJoinedCondition, *f.nodeJoin)
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

// recordEvacuating sets the machine's Evacuating condition to c, with an
// Event when its status or reason changes (a warning for a tenant drain the
// API blocks).
func (s *Service) recordEvacuating(km *infrav1.KubevirtMachine, c metav1.Condition) {
	if prev := conditions.Get(km, infrav1.EvacuatingCondition); prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
		eventType := corev1.EventTypeNormal
		if c.Reason == infrav1.TenantDrainBlockedReason {
			eventType = corev1.EventTypeWarning
		}
		s.Recorder.Eventf(km, nil, eventType, c.Reason, "Evacuate", "%s", c.Message)
	}
	conditions.Set(km, c)
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

// RecordInfraAccess sets InfraClusterAvailable from whether the machine's
// infra cluster can be used, with an Event when it cannot: the rule every
// kind follows (infracluster.Access).
func RecordInfraAccess(recorder events.EventRecorder, km *infrav1.KubevirtMachine, access infracluster.Access) {
	outcome.RecordWarning(recorder, km, infrav1.InfraClusterAvailableCondition, access.Outcome)
}

// MarkNotPaused sets Paused False: the machine's Cluster is not paused. A
// paused one sets it through Cluster API's util/paused in the controller,
// which writes at once.
func MarkNotPaused(km *infrav1.KubevirtMachine) {
	outcome.MarkNotPaused(km)
}

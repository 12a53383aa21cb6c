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
// (VirtualMachineReady, BootstrapSucceeded, NodeJoined, InPlaceUpdated):
// the phases decide the outcome, and only these functions write it
// (docs/status_test.go holds it). LiveMigratable, Migrating and
// Evacuating are the evacuation's, InfraClusterAvailable, Paused and
// Ready the controller's.

package machine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
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

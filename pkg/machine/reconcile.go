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

package machine

import (
	"context"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// Reconcile moves a machine towards a running, bootstrapped VM and reports
// where it stands in VirtualMachineReady and BootstrapSucceeded, the
// conditions only this service writes. The outcome says whether the machine
// is provisioned, and when to look again where no event will say. It runs
// the phases below in order, like Cluster API's machine controller; a phase
// that ends the reconcile says so. The phases record what they found in the
// run; the status is written from it once, at the end (status.go).
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	r := &reconcileRun{}
	defer s.writeStatus(sc.KubevirtMachine, &r.found)
	for _, phase := range []func(context.Context, *Scope, *reconcileRun) (outcome.Outcome, bool, error){
		s.reconcileOwners,   // a Machine, its Cluster and a usable infra cluster
		s.reconcilePoolVM,   // a VM a pool made: found, never created
		s.reconcileVM,       // the VM: found, else created
		s.reconcileUserData, // the VM's user data Secret
		s.reconcileInstance, // its instance: restart, live migration, evacuation
		s.reconcileInPlace,  // an in-place update of the running VM
		s.reconcileReport,   // its state, the bootstrap check, the tenant Node
	} {
		if o, end, err := phase(ctx, sc, r); err != nil || end {
			return o, err
		}
	}
	return outcome.Outcome{}, nil
}

// reconcileRun carries what a reconcile's phases found: for the next
// phases, and for the machine's status, which status.go writes from it
// once they are done.
type reconcileRun struct {
	vm  *kubevirtv1.VirtualMachine
	vmi *kubevirtv1.VirtualMachineInstance
	// requeue is when the evacuation asked to look again.
	requeue time.Duration
	// found is what the status reports.
	found findings
}

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

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// reconcileOwners waits for the machine's owners and for its infra cluster.
func (s *Service) reconcileOwners(_ context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	km := sc.KubevirtMachine
	if sc.Cluster == nil {
		o := outcome.Wait(infrav1.WaitingForOwnerReason, "waiting for a Machine to own this KubevirtMachine and for its Cluster to exist")
		r.found.vm = &o
		return o, true, nil
	}
	if sc.Access.Available() {
		return outcome.Outcome{}, false, nil
	}
	o := sc.Access.Outcome
	if provisioned(km) {
		// A provisioned machine's VM keeps running while its infra
		// cluster's API is away; only InfraClusterAvailable says so.
		return o, true, nil
	}
	o = outcome.Outcome{State: o.State, Reason: o.Reason, RequeueAfter: o.RequeueAfter,
		Message: "cannot use the infra cluster: " + o.Message}
	r.found.vm = &o
	return o, true, nil
}

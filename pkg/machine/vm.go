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
	"fmt"

	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// reconcileVM finds the machine's VM, or creates it. The reconcile ends
// with the create, with a VM deleted outside the provider, with the
// adoption of the VM the community provider made for this machine
// (adopt.go), and with a VM of the same name that is someone else's. A pool's VM was found already.
func (s *Service) reconcileVM(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	if r.vm != nil {
		return outcome.Outcome{}, false, nil
	}
	km := sc.KubevirtMachine
	vm := &kubevirtv1.VirtualMachine{}
	key := sc.VM
	found, err := get(ctx, sc.Access.Infra.Client, key, vm)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	if !found && vmCreated(km) {
		// The cache may lag behind our own create; ask the API server.
		if found, err = get(ctx, sc.Access.Infra.APIReader, key, vm); err != nil {
			return outcome.Outcome{}, true, err
		}
		if !found {
			return r.found.vmGone(fmt.Sprintf(
				"VirtualMachine %s was deleted outside the provider; the machine is not recreated with a new identity, delete the Machine (a MachineHealthCheck does) to replace it", key)), true, nil
		}
	}
	if !found {
		o, err := s.create(ctx, sc, key, &r.found)
		if err != nil {
			if o.Reason != "" {
				r.found.vm = &o
			}
			return outcome.Outcome{}, true, err
		}
		r.found.vm = &o
		return o, true, nil
	}
	if !s.ours(km, vm) && adoption.CommunityVM(vm, communityMachine(sc)) {
		o, err := s.adopt(ctx, sc, vm)
		if o.Reason != "" {
			r.found.vm = &o
		}
		return o, true, err
	}
	if !s.ours(km, vm) {
		o := outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"VirtualMachine %s exists but was not created for this KubevirtMachine; rename or remove it", key))
		r.found.vm = &o
		return o, true, nil
	}
	if km.Spec.ProviderID == nil {
		km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	}
	r.vm = vm
	return outcome.Outcome{}, false, nil
}

// vmCreated reports whether the stored status shows that the machine's VM
// was created: BootstrapSucceeded is set only from then on. Before the
// status says so, a VM that is not found is created (again): it never
// provisioned, so no Node can have taken its identity.
func vmCreated(km *infrav1.KubevirtMachine) bool {
	return provisioned(km) || conditions.Has(km, infrav1.BootstrapSucceededCondition)
}

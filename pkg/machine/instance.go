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

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/evacuation"
)

// reconcileInstance reads the VM's instance and acts on it: a requested
// restart, KubeVirt's live migration state, an evacuation off a draining
// infra node.
func (s *Service) reconcileInstance(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	km := sc.KubevirtMachine
	infra := sc.Access.Infra
	candidate := &kubevirtv1.VirtualMachineInstance{}
	found, err := get(ctx, infra.Client, client.ObjectKeyFromObject(r.vm), candidate)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	if found {
		r.vmi = candidate
	}
	if err := s.labelInstance(ctx, sc, r.vm, r.vmi); err != nil {
		return outcome.Outcome{}, true, err
	}
	if _, err := s.restartIfRequested(ctx, sc, r.vm, r.vmi); err != nil {
		return outcome.Outcome{}, true, err
	}
	r.found.migration = r.vmi
	r.requeue, err = s.Evacuation.Step(ctx, &evacuation.Target{
		KubevirtMachine: km, Machine: sc.Machine, Cluster: sc.Cluster, Infra: infra,
		DeleteInstance: func(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
			return s.deleteInstance(ctx, sc, vmi)
		},
		Evacuating: &r.found.evacuating,
	}, r.vm, r.vmi)
	return outcome.Outcome{}, err != nil, err
}

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

package machinepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/poolbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// Delete deletes the pool's VirtualMachinePool and waits until it and its
// VMs are gone: KubeVirt's pool controller lets go of its VMs and the
// garbage collector deletes them, their DataVolumes and the user data
// Secret, all owned by the pool. The outcome is done once nothing is left.
func (s *Service) Delete(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	o, err := s.delete(ctx, sc)
	s.record(sc.Pool, o)
	return o, err
}

func (s *Service) delete(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	if sc.Access.Outcome.Reason == infrav1.NotAllowedByPolicyReason && sc.Pool.Status.VirtualMachinePool == "" {
		// Refused before its VirtualMachinePool was created.
		return outcome.Ready(clusterv1.DeletionCompletedReason, "the policy refused the pool; nothing was created for it"), nil
	}
	if !sc.Access.Reachable() {
		o := sc.Access.Outcome
		return outcome.Outcome{State: o.State, Reason: o.Reason, RequeueAfter: o.RequeueAfter,
			Message: "cannot delete the VirtualMachinePool: " + o.Message}, nil
	}
	if !sc.Access.Available() {
		// Without KubeVirt's API there is no pool to delete.
		return outcome.Ready(clusterv1.DeletionCompletedReason, "the infra cluster serves no VirtualMachinePools"), nil
	}
	key := sc.Key()
	infra := sc.Access.Infra
	pool := &poolv1.VirtualMachinePool{}
	err := infra.Client.Get(ctx, key, pool)
	if meta.IsNoMatchError(err) {
		// Without the pool API there is no pool to delete.
		return outcome.Ready(clusterv1.DeletionCompletedReason, "the infra cluster serves no VirtualMachinePools"), nil
	}
	if client.IgnoreNotFound(err) != nil {
		return outcome.Outcome{}, fmt.Errorf("reading VirtualMachinePool %s: %w", key, err)
	}
	owner := vmbuilder.OwnerOf(sc.Pool.Namespace, sc.Pool.Name)
	if err == nil && pool.Annotations[infrav1.PoolOwnerAnnotation] == owner {
		if pool.DeletionTimestamp.IsZero() {
			if err := infra.Client.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
				return outcome.Outcome{}, fmt.Errorf("deleting VirtualMachinePool %s: %w", key, err)
			}
			s.Recorder.Eventf(sc.Pool, pool, corev1.EventTypeNormal, "VirtualMachinePoolDeleted", "DeleteVirtualMachinePool",
				"deleted VirtualMachinePool %s on the %s", key, infra.Description())
		}
		return outcome.Wait(infrav1.DeletingReason, fmt.Sprintf("waiting for VirtualMachinePool %s to be deleted", key)), nil
	}
	vms := &kubevirtv1.VirtualMachineList{}
	if err := infra.Client.List(ctx, vms, client.InNamespace(key.Namespace), client.MatchingLabels(poolbuilder.Selector(key.Name))); err != nil {
		return outcome.Outcome{}, fmt.Errorf("listing the VMs of VirtualMachinePool %s: %w", key, err)
	}
	left := 0
	for i := range vms.Items {
		if vms.Items[i].Annotations[infrav1.PoolOwnerAnnotation] == owner {
			left++
		}
	}
	if left > 0 {
		return outcome.Wait(infrav1.DeletingReason, fmt.Sprintf("waiting for the %d VMs of VirtualMachinePool %s to be deleted", left, key)), nil
	}
	return outcome.Ready(clusterv1.DeletionCompletedReason, "the VirtualMachinePool and its VMs are gone"), nil
}

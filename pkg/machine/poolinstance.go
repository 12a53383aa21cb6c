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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// PoolVMUID is the UID of the VirtualMachinePool VM the machine stands for;
// empty for a machine whose VM the provider creates itself.
func (s *Scope) PoolVMUID() types.UID {
	return types.UID(s.KubevirtMachine.Annotations[infrav1.PoolVMUIDAnnotation])
}

// reconcilePoolVM finds the VM a KubevirtMachinePool's VirtualMachinePool
// made for this machine, for the phases after reconcileUserData. The pool
// creates the VM, its disks and shares one user data Secret among its VMs,
// so nothing is created here; a VM that is gone, replaced or being deleted
// by someone else ends the reconcile, and the Machine's deletion (a
// MachineHealthCheck's) replaces the instance.
func (s *Service) reconcilePoolVM(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	if sc.PoolVMUID() == "" {
		return outcome.Outcome{}, false, nil
	}
	km := sc.KubevirtMachine
	key := sc.VM
	vm := &kubevirtv1.VirtualMachine{}
	found, err := get(ctx, sc.Access.Infra.Client, key, vm)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	var gone string
	switch {
	case !found || vm.UID != sc.PoolVMUID():
		gone = fmt.Sprintf("VirtualMachine %s (UID %s) of the VirtualMachinePool is gone", key, sc.PoolVMUID())
	case !vm.DeletionTimestamp.IsZero():
		gone = fmt.Sprintf("VirtualMachine %s of the VirtualMachinePool is being deleted outside the provider", key)
	}
	if gone != "" {
		return r.found.vmGone(gone + "; delete the Machine (a MachineHealthCheck does) and the pool replaces the instance"), true, nil
	}
	if km.Spec.ProviderID == nil {
		km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	}
	r.vm = vm
	return outcome.Outcome{}, false, nil
}

// deletePoolInstance deletes the machine's pool VM and waits for its
// instance to stop. The VM itself stays, held by the pool's finalizer,
// until the KubevirtMachinePool sees the Machine gone too: KubeVirt would
// otherwise make the VM's replacement under the same name, and its guest
// join as a Node of that name, before Cluster API deleted the old Node.
func (s *Service) deletePoolInstance(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	key := sc.VM
	vm := &kubevirtv1.VirtualMachine{}
	found, err := get(ctx, sc.Access.Infra.APIReader, key, vm)
	if err != nil || !found || vm.UID != sc.PoolVMUID() {
		return outcome.Ready(infrav1.DeletingReason, "the pool's VirtualMachine is gone"), err
	}
	if vm.DeletionTimestamp.IsZero() {
		if err := sc.Access.Infra.Client.Delete(ctx, vm, client.Preconditions{UID: &vm.UID}); client.IgnoreNotFound(err) != nil {
			return outcome.Outcome{}, fmt.Errorf("deleting VirtualMachine %s: %w", key, err)
		}
		s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, "VirtualMachineDeleting", "DeleteVirtualMachine", "deleting VirtualMachine %s of the pool", key)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	found, err = get(ctx, sc.Access.Infra.APIReader, key, vmi)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if found && ownedBy(vmi, vm.UID) {
		return s.waitForInstance(ctx, sc, key, fmt.Sprintf("waiting for the instance of VirtualMachine %s to stop", key))
	}
	return outcome.Ready(infrav1.DeletingReason, "the pool's VirtualMachine is stopped and marked for deletion"), nil
}

func ownedBy(obj client.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// vmGone records a VM deleted outside the provider, or a pool's VM gone, in
// the machine's conditions, and returns the outcome that says so.
func (f *findings) vmGone(message string) outcome.Outcome {
	bootstrap := outcome.Fail(infrav1.VirtualMachineDeletedReason, "the VirtualMachine is gone")
	o := outcome.Fail(infrav1.VirtualMachineDeletedReason, message)
	f.bootstrap, f.notReady, f.vm = &bootstrap, true, &o
	return o
}

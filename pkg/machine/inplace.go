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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// reconcileInPlace applies an in-place update to the running VM
// (docs/in-place-updates.md): Cluster API wrote the new spec onto the
// KubevirtMachine with its update-in-progress annotation, which the
// webhook allows only for what can change in place. The VM gets the
// spec's CPU sockets, guest memory, labels and annotations, and the
// disks' claims the storage their sizes need; KubeVirt hot-plugs CPU and
// memory through a live migration and grows the disks with their claims,
// and InPlaceUpdated follows it until the update extension tells Cluster API it is done. Machines
// never updated in place are left alone, so the phase costs them nothing.
func (s *Service) reconcileInPlace(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	km := sc.KubevirtMachine
	_, updating := km.Annotations[clusterv1.UpdateInProgressAnnotation]
	if sc.PoolVMUID() != "" || (!updating && !conditions.Has(km, infrav1.InPlaceUpdatedCondition)) {
		return outcome.Outcome{}, false, nil
	}
	want := inplace.WantOf(&km.Spec)
	patch, err := inplace.VMPatch(r.vm, want, vmbuilder.ProviderKey)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	var grow []inplace.ClaimGrowth
	if updating {
		// Claims grow only for an update Cluster API asked for: what a
		// claim needs follows CDI's overhead, which may change later, and
		// a claim never shrinks.
		grow, _ = inplace.ClaimsToGrow(want, r.vm, r.vmi)
	}
	if patch == nil && len(grow) == 0 {
		r.found.recordInPlace(inplace.Progress(want, r.vm, r.vmi))
		return outcome.Outcome{}, false, nil
	}
	if patch != nil {
		// The new labels and annotations reach KubeVirt, Multus and the
		// CNI as the VM's did: the policy checks them again, as it did at
		// creation.
		// Changing the spec back wakes the machine; the VM keeps running.
		if o, err := s.guestAllowed(ctx, sc, r.vm.Namespace); err != nil || o.Reason != "" {
			if err == nil {
				r.found.recordInPlace(o)
			}
			return outcome.Outcome{}, false, err
		}
		err = sc.Access.Infra.Client.Patch(ctx, r.vm, client.RawPatch(types.MergePatchType, patch))
		if refused(err) {
			// virt-api refuses what KubeVirt cannot do, such as growth
			// beyond a maximum the VM sets; retrying would not change its
			// mind.
			r.found.recordInPlace(outcome.Fail(infrav1.InPlaceUpdateFailedReason,
				fmt.Sprintf("KubeVirt refused the change of VirtualMachine %s/%s: %s", r.vm.Namespace, r.vm.Name, err.Error())))
			return outcome.Outcome{}, false, nil
		}
		if err != nil {
			return outcome.Outcome{}, true, err
		}
		s.Recorder.Eventf(km, r.vm, corev1.EventTypeNormal, "InPlaceUpdate", "UpdateVirtualMachine",
			"VirtualMachine %s/%s updated in place: %s", r.vm.Namespace, r.vm.Name, string(patch))
	}
	for _, g := range grow {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: r.vm.Namespace, Name: g.Claim}}
		body := fmt.Appendf(nil, `{"spec":{"resources":{"requests":{"storage":%q}}}}`, g.Request.String())
		err := sc.Access.Infra.Client.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, body))
		if refused(err) {
			// The API server refuses to grow a claim whose storage class
			// does not allow expansion.
			r.found.recordInPlace(outcome.Fail(infrav1.InPlaceUpdateFailedReason,
				fmt.Sprintf("the infra cluster refused to grow claim %s/%s to %s: %s", pvc.Namespace, pvc.Name, g.Request.String(), err.Error())))
			return outcome.Outcome{}, false, nil
		}
		if err != nil {
			return outcome.Outcome{}, true, err
		}
		s.Recorder.Eventf(km, pvc, corev1.EventTypeNormal, "InPlaceUpdate", "GrowClaim",
			"claim %s/%s asked to grow to %s", pvc.Namespace, pvc.Name, g.Request.String())
	}
	// The VM's and the claims' status have not caught up with the
	// patches; their next update brings the next reconcile.
	r.found.recordInPlace(outcome.Wait(infrav1.InPlaceUpdatingReason,
		"asked KubeVirt and the infra cluster to apply the change to the running VM"))
	return outcome.Outcome{}, false, nil
}

// recordInPlace records what InPlaceUpdated says.
func (f *findings) recordInPlace(o outcome.Outcome) {
	f.inPlace = &o
}

// refused says whether the API server refused a write for good.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

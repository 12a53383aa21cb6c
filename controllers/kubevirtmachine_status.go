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

package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
)

// writeBack stores what a reconcile changed in at most two requests: one
// patch of metadata and spec, one of the whole status. Cluster API's patch
// helper would split the status into a conditions patch and a patch of the
// rest, a write more whenever both change, which for a machine is nearly
// every time. This controller is the only writer of a KubevirtMachine's
// status (the Paused condition included), so a merge patch of its status
// loses nobody's change. The status of a machine still provisioning may be
// held back (machine.Service.HoldStatus); the returned duration is when to
// look again to write it.
func (r *KubevirtMachineReconciler) writeBack(ctx context.Context, stored, km *infrav1.KubevirtMachine, o outcome.Outcome) (time.Duration, error) {
	status := km.Status.DeepCopy()
	held := r.Machines.HoldStatus(stored, km, o, time.Now())

	// The spec patch sends no status, and its answer carries the stored
	// status, which is put back to the one computed.
	base := stored.DeepCopy()
	base.Status = km.Status
	if !equality.Semantic.DeepEqual(base, km) {
		if err := r.Client.Patch(ctx, km, client.MergeFrom(base)); err != nil {
			return 0, client.IgnoreNotFound(err)
		}
		km.Status = *status
	}
	if held > 0 || equality.Semantic.DeepEqual(stored.Status, *status) {
		return held, nil
	}
	base = km.DeepCopy()
	base.Status = stored.Status
	err := r.Client.Status().Patch(ctx, km, client.MergeFrom(base))
	if apierrors.IsNotFound(err) {
		// The finalizer just went, and the machine with it.
		return 0, nil
	}
	return 0, err
}

// markNotPaused records that the machine's Cluster is not paused, with the
// rest of the status rather than in a write of its own as
// paused.EnsurePausedCondition does; a paused Cluster goes through that
// instead, which writes at once.
func markNotPaused(km *infrav1.KubevirtMachine) {
	if c := conditions.Get(km, clusterv1.PausedCondition); c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == km.Generation {
		return
	}
	conditions.Set(km, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.NotPausedReason, ObservedGeneration: km.Generation})
}

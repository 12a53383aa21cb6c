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

package sim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// setupResizer plays the CSI external-resizer and the kubelet's part of
// an online volume expansion, as Kubernetes documents it ("Expanding
// Persistent Volumes Claims", and external-resizer's README): a bound
// claim requesting more than its volume holds gets a larger volume when
// its class allows expansion (the API server's PersistentVolumeClaimResize
// admission refuses the request otherwise; the check here is the
// resizer's own). A block claim then has the new capacity; a file system
// claim waits with FileSystemResizePending until a running pod mounts it
// and the kubelet grows the file system.
func (s *Simulator) setupResizer(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-resizer").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(mountedClaims)).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.resizeClaim))
}

// mountedClaims are the claims a running pod mounts.
func mountedClaims(_ context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Status.Phase != corev1.PodRunning {
		return nil
	}
	var reqs []reconcile.Request
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}})
		}
	}
	return reqs
}

func (s *Simulator) resizeClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want, has := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || want.Cmp(has) <= 0 || !pvc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Annotations[annProvisionedBy] == "" {
		return reconcile.Result{}, nil
	}
	sc := &storagev1.StorageClass{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: pv.Spec.StorageClassName}, sc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ptr.Deref(sc.AllowVolumeExpansion, false) {
		s.warn(ctx, pvc, "VolumeResizeFailed", "storage class "+sc.Name+" does not allow volume expansion")
		return reconcile.Result{}, nil
	}
	if size := pv.Spec.Capacity[corev1.ResourceStorage]; size.Cmp(want) < 0 {
		before := pv.DeepCopy()
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		if err := s.client.Patch(ctx, pv, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, err
		}
	}
	before := pvc.DeepCopy()
	block := pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
	if !block {
		mounted, err := s.mountedByRunningPod(ctx, pvc)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !mounted {
			// The pod that mounts it next brings the kubelet's part.
			setClaimCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending,
				"Waiting for user to (re-)start a pod to finish file system resize of volume on node.")
			return reconcile.Result{}, s.client.Status().Patch(ctx, pvc, client.MergeFrom(before))
		}
	}
	pvc.Status.Capacity[corev1.ResourceStorage] = want
	pvc.Status.Conditions = nil
	return reconcile.Result{}, s.client.Status().Patch(ctx, pvc, client.MergeFrom(before))
}

// mountedByRunningPod says whether a running pod mounts the claim.
func (s *Simulator) mountedByRunningPod(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(pvc.Namespace)); err != nil {
		return false, err
	}
	for i := range pods.Items {
		for _, r := range mountedClaims(ctx, &pods.Items[i]) {
			if r.Name == pvc.Name {
				return true, nil
			}
		}
	}
	return false, nil
}

// setClaimCondition sets a True condition of the claim, once.
func setClaimCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType, message string) {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t {
			return
		}
	}
	pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: t, Status: corev1.ConditionTrue, Message: message})
}

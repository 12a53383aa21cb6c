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

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// ContentAnnotation records what a volume was filled with: the source of an
// import (its URL), copied by every clone, or "blank". It sits on the
// PersistentVolume, which CDI's populators hand from claim to claim.
const ContentAnnotation = "sim.capkv.io/content"

// setupProvisioner plays the CSI external provisioner of every storage
// class: a claim gets a volume as soon as it may bind (Immediate classes,
// or once the scheduler picked a node for a WaitForFirstConsumer claim),
// and volumes of deleted claims go away.
func (s *Simulator) setupProvisioner(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("sim-provisioner").
		For(&corev1.PersistentVolumeClaim{}).
		WithOptions(concurrency())
	served, err := snapshotsServed(mgr)
	if err != nil {
		return err
	}
	if served {
		// A claim restored from a snapshot waits for it to be ready.
		b = b.Watches(&snapshotv1.VolumeSnapshot{}, handler.EnqueueRequestsFromMapFunc(s.claimsRestoredFrom))
	}
	return b.Complete(reconcile.Func(s.reconcileClaim))
}

// claimsRestoredFrom are the unbound claims restored from a snapshot.
func (s *Simulator) claimsRestoredFrom(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := s.client.List(ctx, claims, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, pvc := range claims.Items {
		if pvc.Spec.VolumeName == "" && restoredFrom(&pvc) == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pvc)})
		}
	}
	return reqs
}

func (s *Simulator) reconcileClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName != "" || !pvc.DeletionTimestamp.IsZero() || pvc.Spec.StorageClassName == nil {
		return reconcile.Result{}, nil
	}
	sc := &storagev1.StorageClass{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	wffc := sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if wffc && pvc.Annotations[annSelectedNode] == "" {
		return reconcile.Result{}, nil
	}
	content, ready, err := s.dataSource(ctx, pvc, sc)
	if err != nil || !ready {
		return reconcile.Result{}, err
	}
	pvName := "pvc-" + string(pvc.UID)
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{annProvisionedBy: sc.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    &mode,
			StorageClassName:              sc.Name,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: sc.Provisioner, VolumeHandle: string(pvc.UID)}},
		},
	}
	if content != nil {
		pv.Annotations[ContentAnnotation] = *content
	}
	err = s.client.Create(ctx, pv)
	if apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, nil
	}
	if err == nil && content != nil {
		s.Counters.AddIn(pvc.Namespace, Clones, 1)
		s.Counters.AddIn(pvc.Namespace, SmartClones, 1)
	}
	return reconcile.Result{}, err
}

// dataSource says whether the driver may provision a claim now, and what a
// CSI clone fills it with. A claim whose dataSourceRef names a volume
// populator (CDI's VolumeImportSource, VolumeCloneSource, ...) is the
// populator's to fill: the external provisioner leaves it alone. A claim
// of another claim is a CSI clone, made by the driver from a bound source
// of the same driver in the same namespace, as external-provisioner
// requires; a claim of a VolumeSnapshot is restored from it
// (snapshotSource).
func (s *Simulator) dataSource(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (*string, bool, error) {
	ref := pvc.Spec.DataSourceRef
	if ref == nil {
		return nil, true, nil
	}
	if restoredFrom(pvc) != "" {
		return s.snapshotSource(ctx, pvc, sc.Provisioner)
	}
	if ref.APIGroup != nil && *ref.APIGroup != "" || ref.Kind != "PersistentVolumeClaim" {
		return nil, false, nil
	}
	source := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: pvc.Namespace, Name: ref.Name}, source); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	if source.Status.Phase != corev1.ClaimBound {
		return nil, false, nil
	}
	if deref(source.Spec.StorageClassName) != sc.Name {
		srcClass := &storagev1.StorageClass{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: deref(source.Spec.StorageClassName)}, srcClass); err != nil || srcClass.Provisioner != sc.Provisioner {
			s.warn(ctx, pvc, "ProvisioningFailed",
				"failed to provision volume: the source PVC and destination PVCs must use the same CSI driver")
			return nil, false, client.IgnoreNotFound(err)
		}
	}
	content, err := s.content(ctx, source)
	return &content, err == nil, err
}

// setupVolumeReclaimer deletes released volumes the simulator provisioned,
// as the external provisioner does for the Delete reclaim policy.
func (s *Simulator) setupVolumeReclaimer(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-reclaimer").
		For(&corev1.PersistentVolume{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			pv := &corev1.PersistentVolume{}
			if err := s.client.Get(ctx, req.NamespacedName, pv); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if pv.Status.Phase == corev1.VolumeReleased && pv.Annotations[annProvisionedBy] != "" &&
				pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
				return reconcile.Result{}, client.IgnoreNotFound(s.client.Delete(ctx, pv))
			}
			return reconcile.Result{}, nil
		}))
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

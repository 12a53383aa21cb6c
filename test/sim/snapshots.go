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
	"fmt"
	"slices"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The finalizers and annotation external-snapshotter's snapshot-controller
// uses (pkg/utils/util.go).
const (
	snapshotBoundFinalizer  = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
	snapshotSourceFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
	contentBoundFinalizer   = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	annDefaultSnapshotClass = "snapshot.storage.kubernetes.io/is-default-class"
	snapshotKind            = "VolumeSnapshot"
	snapshotContentPrefix   = "snapcontent-"
)

// setupSnapshotter plays external-snapshotter: its snapshot-controller,
// which gives a VolumeSnapshot of a claim a VolumeSnapshotContent and
// copies the content's status back, and the CSI driver's csi-snapshotter
// sidecar, which takes the snapshot. Only dynamic snapshots (of a claim)
// are played; CDI takes no other kind. A world without the snapshot CRDs
// gets no snapshotter.
func (s *Simulator) setupSnapshotter(mgr ctrl.Manager) error {
	if served, err := snapshotsServed(mgr); !served {
		return err
	}
	contentToSnapshot := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ref := o.(*snapshotv1.VolumeSnapshotContent).Spec.VolumeSnapshotRef
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
	})
	// A snapshot waits for its claim to bind, and a deleted one for the
	// claims being restored from it.
	claimToSnapshots := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pvc := o.(*corev1.PersistentVolumeClaim)
		var reqs []reconcile.Request
		if name := restoredFrom(pvc); name != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pvc.Namespace, Name: name}})
		}
		list := &snapshotv1.VolumeSnapshotList{}
		if err := s.client.List(ctx, list, client.InNamespace(pvc.Namespace)); err == nil {
			for _, vs := range list.Items {
				if ptr.Deref(vs.Spec.Source.PersistentVolumeClaimName, "") == pvc.Name {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vs)})
				}
			}
		}
		return reqs
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-snapshot-controller").
		For(&snapshotv1.VolumeSnapshot{}).
		Watches(&snapshotv1.VolumeSnapshotContent{}, contentToSnapshot).
		Watches(&corev1.PersistentVolumeClaim{}, claimToSnapshots).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileSnapshot)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-csi-snapshotter").
		For(&snapshotv1.VolumeSnapshotContent{}).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileSnapshotContent))
}

// snapshotsServed says whether the API server serves VolumeSnapshots.
func snapshotsServed(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(snapshotv1.SchemeGroupVersion.WithKind(snapshotKind).GroupKind())
	if isNoMatch(err) {
		return false, nil
	}
	return err == nil, err
}

// reconcileSnapshot binds a VolumeSnapshot to a content it creates, copies
// the content's status to it, and on deletion deletes the content (the
// Delete policy) once no claim is being restored from it.
func (s *Simulator) reconcileSnapshot(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vs := &snapshotv1.VolumeSnapshot{}
	if err := s.client.Get(ctx, req.NamespacedName, vs); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !vs.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, s.deleteSnapshot(ctx, vs)
	}
	claimName := ptr.Deref(vs.Spec.Source.PersistentVolumeClaimName, "")
	if claimName == "" {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(vs, snapshotBoundFinalizer) || !controllerutil.ContainsFinalizer(vs, snapshotSourceFinalizer) {
		patch := client.MergeFrom(vs.DeepCopy())
		controllerutil.AddFinalizer(vs, snapshotSourceFinalizer)
		controllerutil.AddFinalizer(vs, snapshotBoundFinalizer)
		return reconcile.Result{}, s.client.Patch(ctx, vs, patch)
	}
	if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
		return reconcile.Result{}, s.createContent(ctx, vs, claimName)
	}
	content := &snapshotv1.VolumeSnapshotContent{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: *vs.Status.BoundVolumeSnapshotContentName}, content); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if content.Status == nil || content.Status.CreationTime == nil {
		return reconcile.Result{}, nil
	}
	status := vs.Status.DeepCopy()
	// A status keeps whole seconds.
	status.CreationTime = ptr.To(metav1.NewTime(time.Unix(0, *content.Status.CreationTime).Truncate(time.Second)))
	status.ReadyToUse = content.Status.ReadyToUse
	status.RestoreSize = resource.NewQuantity(ptr.Deref(content.Status.RestoreSize, 0), resource.BinarySI)
	status.Error = content.Status.Error
	if equality.Semantic.DeepEqual(vs.Status, status) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(vs.DeepCopy())
	vs.Status = status
	return reconcile.Result{}, s.client.Status().Patch(ctx, vs, patch)
}

// createContent checks what the snapshot-controller checks before it asks
// the driver for a snapshot (a class for the claim's driver, a bound claim
// of a CSI volume of that driver) and creates the content. A failed check
// is the snapshot's status error and a Warning Event, as upstream records.
func (s *Simulator) createContent(ctx context.Context, vs *snapshotv1.VolumeSnapshot, claimName string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: vs.Namespace, Name: claimName}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return s.snapshotError(ctx, vs, "SnapshotContentCreationFailed",
				fmt.Sprintf("Failed to create snapshot content with error failed to get input parameters to create snapshot %s: %v", vs.Name, err))
		}
		return err
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return s.snapshotError(ctx, vs, "SnapshotContentCreationFailed",
			fmt.Sprintf("Failed to create snapshot content with error the PVC %s is not yet bound to a PV, will not attempt to take a snapshot", pvc.Name))
	}
	pv := &corev1.PersistentVolume{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pv.Spec.CSI == nil {
		return s.snapshotError(ctx, vs, "SnapshotContentCreationFailed",
			fmt.Sprintf("Failed to create snapshot content with error the PV %s is not provisioned by a CSI driver", pv.Name))
	}
	class, err := s.snapshotClass(ctx, vs, pv.Spec.CSI.Driver)
	if err != nil || class == nil {
		return err
	}
	if class.Driver != pv.Spec.CSI.Driver {
		return s.snapshotError(ctx, vs, "SnapshotContentCreationFailed",
			fmt.Sprintf("Failed to create snapshot content with error snapshot class %s is for driver %s, the volume's driver is %s", class.Name, class.Driver, pv.Spec.CSI.Driver))
	}
	content := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotContentPrefix + string(vs.UID)},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: snapshotKind, APIVersion: snapshotv1.SchemeGroupVersion.String(),
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID},
			DeletionPolicy:          class.DeletionPolicy,
			Driver:                  class.Driver,
			VolumeSnapshotClassName: &class.Name,
			Source:                  snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &pv.Spec.CSI.VolumeHandle},
			SourceVolumeMode:        pv.Spec.VolumeMode,
		},
	}
	if err := s.client.Create(ctx, content); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	patch := client.MergeFrom(vs.DeepCopy())
	vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content.Name, ReadyToUse: ptr.To(false)}
	return s.client.Status().Patch(ctx, vs, patch)
}

// snapshotClass is the snapshot's class, or the driver's default one;
// nil after recording the error when there is none.
func (s *Simulator) snapshotClass(ctx context.Context, vs *snapshotv1.VolumeSnapshot, driver string) (*snapshotv1.VolumeSnapshotClass, error) {
	if name := ptr.Deref(vs.Spec.VolumeSnapshotClassName, ""); name != "" {
		class := &snapshotv1.VolumeSnapshotClass{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, s.snapshotError(ctx, vs, "GetSnapshotClassFailed",
					fmt.Sprintf("Failed to get snapshot class with error volumesnapshotclass.snapshot.storage.k8s.io %q not found", name))
			}
			return nil, err
		}
		return class, nil
	}
	classes := &snapshotv1.VolumeSnapshotClassList{}
	if err := s.client.List(ctx, classes); err != nil {
		return nil, err
	}
	for i := range classes.Items {
		if c := &classes.Items[i]; c.Driver == driver && c.Annotations[annDefaultSnapshotClass] == "true" {
			return c, nil
		}
	}
	return nil, s.snapshotError(ctx, vs, "GetSnapshotClassFailed",
		fmt.Sprintf("Failed to get snapshot class with error cannot find default snapshot class for driver %s", driver))
}

// snapshotError records why a snapshot cannot be taken (yet): the
// controller retries when the claim or the content changes.
func (s *Simulator) snapshotError(ctx context.Context, vs *snapshotv1.VolumeSnapshot, reason, message string) error {
	if vs.Status != nil && vs.Status.Error != nil && ptr.Deref(vs.Status.Error.Message, "") == message {
		return nil
	}
	s.warn(ctx, vs, reason, message)
	patch := client.MergeFrom(vs.DeepCopy())
	if vs.Status == nil {
		vs.Status = &snapshotv1.VolumeSnapshotStatus{}
	}
	vs.Status.ReadyToUse = ptr.To(false)
	vs.Status.Error = &snapshotv1.VolumeSnapshotError{Time: ptr.To(metav1.Now()), Message: &message}
	return s.client.Status().Patch(ctx, vs, patch)
}

// deleteSnapshot keeps a snapshot while a claim is being restored from it
// (the as-source protection), then deletes its content if the policy says
// Delete and lets the snapshot go once the content is gone.
func (s *Simulator) deleteSnapshot(ctx context.Context, vs *snapshotv1.VolumeSnapshot) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := s.client.List(ctx, claims, client.InNamespace(vs.Namespace)); err != nil {
		return err
	}
	if slices.ContainsFunc(claims.Items, func(pvc corev1.PersistentVolumeClaim) bool {
		return restoredFrom(&pvc) == vs.Name && pvc.Status.Phase == corev1.ClaimPending
	}) {
		return nil
	}
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		content := &snapshotv1.VolumeSnapshotContent{}
		err := s.client.Get(ctx, types.NamespacedName{Name: *vs.Status.BoundVolumeSnapshotContentName}, content)
		if err == nil {
			if content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && content.DeletionTimestamp.IsZero() {
				return client.IgnoreNotFound(s.client.Delete(ctx, content))
			}
			if content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete {
				return nil // the sidecar deletes the snapshot, then the content goes
			}
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	patch := client.MergeFrom(vs.DeepCopy())
	controllerutil.RemoveFinalizer(vs, snapshotSourceFinalizer)
	controllerutil.RemoveFinalizer(vs, snapshotBoundFinalizer)
	return client.IgnoreNotFound(s.client.Patch(ctx, vs, patch))
}

// reconcileSnapshotContent is the csi-snapshotter sidecar with the
// simulated driver: it takes the snapshot of a content's volume (what the
// volume holds, at once, ready to use, as large as the volume) and deletes
// it when the content goes.
func (s *Simulator) reconcileSnapshotContent(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	content := &snapshotv1.VolumeSnapshotContent{}
	if err := s.client.Get(ctx, req.NamespacedName, content); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !content.DeletionTimestamp.IsZero() {
		patch := client.MergeFrom(content.DeepCopy())
		controllerutil.RemoveFinalizer(content, contentBoundFinalizer)
		return reconcile.Result{}, client.IgnoreNotFound(s.client.Patch(ctx, content, patch))
	}
	if !controllerutil.ContainsFinalizer(content, contentBoundFinalizer) {
		patch := client.MergeFrom(content.DeepCopy())
		controllerutil.AddFinalizer(content, contentBoundFinalizer)
		return reconcile.Result{}, s.client.Patch(ctx, content, patch)
	}
	handle := ptr.Deref(content.Spec.Source.VolumeHandle, "")
	if handle == "" || content.Status != nil && content.Status.SnapshotHandle != nil {
		return reconcile.Result{}, nil
	}
	volumes := &corev1.PersistentVolumeList{}
	if err := s.client.List(ctx, volumes); err != nil {
		return reconcile.Result{}, err
	}
	i := slices.IndexFunc(volumes.Items, func(pv corev1.PersistentVolume) bool {
		return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == content.Spec.Driver && pv.Spec.CSI.VolumeHandle == handle
	})
	if i < 0 {
		message := fmt.Sprintf("Failed to check and update snapshot content: failed to take snapshot of the volume %s: rpc error: code = NotFound desc = volume not found", handle)
		patch := client.MergeFrom(content.DeepCopy())
		content.Status = &snapshotv1.VolumeSnapshotContentStatus{ReadyToUse: ptr.To(false),
			Error: &snapshotv1.VolumeSnapshotError{Time: ptr.To(metav1.Now()), Message: &message}}
		return reconcile.Result{}, s.client.Status().Patch(ctx, content, patch)
	}
	pv := &volumes.Items[i]
	if held, ok := pv.Annotations[ContentAnnotation]; ok && content.Annotations[ContentAnnotation] != held {
		// What the snapshot holds, for the volumes restored from it.
		patch := client.MergeFrom(content.DeepCopy())
		metav1.SetMetaDataAnnotation(&content.ObjectMeta, ContentAnnotation, held)
		return reconcile.Result{}, s.client.Patch(ctx, content, patch)
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	patch := client.MergeFrom(content.DeepCopy())
	content.Status = &snapshotv1.VolumeSnapshotContentStatus{
		SnapshotHandle: ptr.To("snapshot-" + string(content.UID)),
		CreationTime:   ptr.To(time.Now().UnixNano()),
		RestoreSize:    ptr.To(size.Value()),
		ReadyToUse:     ptr.To(true),
	}
	if err := s.client.Status().Patch(ctx, content, patch); err != nil {
		return reconcile.Result{}, err
	}
	s.Counters.AddIn(content.Spec.VolumeSnapshotRef.Namespace, Snapshots, 1)
	return reconcile.Result{}, nil
}

// snapshotSource says what a claim restored from a snapshot is filled
// with, and whether the driver may provision it now: the snapshot must be
// ready, of the claim's driver, and no larger than the claim, as
// external-provisioner requires (pkg/controller/controller.go,
// getSnapshotSource).
func (s *Simulator) snapshotSource(ctx context.Context, pvc *corev1.PersistentVolumeClaim, driver string) (*string, bool, error) {
	name := restoredFrom(pvc)
	fail := func(format string, args ...any) (*string, bool, error) {
		s.warn(ctx, pvc, "ProvisioningFailed", "failed to provision volume with StorageClass \""+ptr.Deref(pvc.Spec.StorageClassName, "")+"\": "+fmt.Sprintf(format, args...))
		return nil, false, nil
	}
	vs := &snapshotv1.VolumeSnapshot{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: pvc.Namespace, Name: name}, vs); err != nil {
		if apierrors.IsNotFound(err) {
			return fail("error getting handle for DataSource Type VolumeSnapshot by Name %s: error getting snapshot %s from api server: %v", name, name, err)
		}
		return nil, false, err
	}
	if vs.Status == nil || !ptr.Deref(vs.Status.ReadyToUse, false) || vs.Status.BoundVolumeSnapshotContentName == nil {
		return fail("error getting handle for DataSource Type VolumeSnapshot by Name %s: snapshot %s is not Ready", name, name)
	}
	content := &snapshotv1.VolumeSnapshotContent{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: *vs.Status.BoundVolumeSnapshotContentName}, content); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	if content.Spec.Driver != driver {
		return fail("error getting handle for DataSource Type VolumeSnapshot by Name %s: snapshot's driver %s does not match the volume's %s", name, content.Spec.Driver, driver)
	}
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if rs := vs.Status.RestoreSize; rs != nil && requested.Cmp(*rs) < 0 {
		return fail("requested volume size %d is less than the size %d for the source snapshot %s", requested.Value(), rs.Value(), name)
	}
	held := content.Annotations[ContentAnnotation]
	return &held, true, nil
}

// restoredFrom is the snapshot a claim is restored from, if any.
func restoredFrom(pvc *corev1.PersistentVolumeClaim) string {
	if ref := pvc.Spec.DataSourceRef; ref != nil && ptr.Deref(ref.APIGroup, "") == snapshotv1.GroupName && ref.Kind == snapshotKind {
		return ref.Name
	}
	return ""
}

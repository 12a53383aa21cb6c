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
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// smartCloneTime is how long a snapshot or CSI clone takes, before scaling.
const smartCloneTime = 2 * time.Second

func sourceKey(dv *cdiv1.DataVolume) types.NamespacedName {
	ns := dv.Spec.Source.PVC.Namespace
	if ns == "" {
		ns = dv.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: dv.Spec.Source.PVC.Name}
}

// sourceExists reports whether a clone's source claim exists; when it does
// not, CDI records CloneWithoutSource and leaves the phase as it is
// (docs/kubevirt-behaviour.md#clone-phases-and-methods).
func (s *Simulator) sourceExists(ctx context.Context, dv *cdiv1.DataVolume) (bool, error) {
	key := sourceKey(dv)
	err := s.client.Get(ctx, key, &corev1.PersistentVolumeClaim{})
	if apierrors.IsNotFound(err) {
		s.warn(ctx, dv, "CloneWithoutSource", fmt.Sprintf("source pvc %s does not exist", key))
		return false, nil
	}
	return err == nil, err
}

// clonesOfClaim maps a claim to the DataVolumes in its namespace that clone
// from it or own it.
func (s *Simulator) clonesOfClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &cdiv1.DataVolumeList{}
	if err := s.client.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, dv := range list.Items {
		if dv.Spec.Source != nil && dv.Spec.Source.PVC != nil && dv.Status.Phase != cdiv1.Succeeded {
			if k := sourceKey(&dv); k.Name == obj.GetName() && k.Namespace == obj.GetNamespace() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&dv)})
			}
		}
	}
	return reqs
}

// clone copies a source claim: snapshot or CSI clone where the
// StorageProfile allows it, host-assisted copy otherwise. See
// docs/kubevirt-behaviour.md#clone-phases-and-methods and
// docs/kubevirt-behaviour.md#how-cdi-chooses-a-clone-strategy.
func (s *Simulator) clone(ctx context.Context, dv *cdiv1.DataVolume, target *corev1.PersistentVolumeClaim) (reconcile.Result, error) {
	source := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, sourceKey(dv), source); err != nil {
		if apierrors.IsNotFound(err) {
			_, err = s.sourceExists(ctx, dv)
		}
		return reconcile.Result{}, err
	}
	if !populated(source) {
		dv.Status.Phase = cdiv1.CloneScheduled
		return reconcile.Result{}, nil
	}
	strategy, fallback, err := s.chooseCloneStrategy(ctx, source, target)
	if err != nil {
		return reconcile.Result{}, err
	}
	cloneType := map[cdiv1.CDICloneStrategy]string{cdiv1.CloneStrategySnapshot: "snapshot",
		cdiv1.CloneStrategyCsiClone: "csi-clone", cdiv1.CloneStrategyHostAssisted: "copy"}[strategy]
	if target.Annotations[annCloneType] == "" {
		patch := client.MergeFromWithOptions(target.DeepCopy(), client.MergeFromWithOptimisticLock{})
		target.Annotations[annCloneType] = cloneType
		if fallback != "" {
			target.Annotations[annCloneFallback] = fallback
		}
		if err := s.client.Patch(ctx, target, patch); err != nil {
			return reconcile.Result{}, err
		}
		s.Counters.Add(Clones, 1)
		if strategy == cdiv1.CloneStrategyHostAssisted {
			s.Counters.Add(HostAssistedClones, 1)
		} else {
			s.Counters.Add(SmartClones, 1)
		}
	}
	start, _, err := s.transferStart(ctx, target)
	if err != nil {
		return reconcile.Result{}, err
	}
	duration := s.scaled(smartCloneTime)
	phase := map[string]cdiv1.DataVolumePhase{"snapshot": cdiv1.CloneFromSnapshotSourceInProgress,
		"csi-clone": cdiv1.CSICloneInProgress, "copy": cdiv1.CloneInProgress}[cloneType]
	if cloneType == "copy" {
		duration = s.scaled(time.Duration(float64(s.opts.ImageSize) / float64(s.opts.ImportBytesPerSecond) * float64(time.Second)))
	}
	if elapsed := time.Since(start); elapsed < duration {
		dv.Status.Phase = phase
		dv.Status.Progress = cdiv1.DataVolumeProgress(fmt.Sprintf("%.2f%%", 100*float64(elapsed)/float64(duration)))
		return reconcile.Result{RequeueAfter: duration - elapsed}, nil
	}
	if cloneType == "copy" {
		s.Counters.Add(CloneBytes, s.opts.ImageSize)
	}
	if dv.Annotations[annCloneType] != cloneType {
		patch := client.MergeFrom(dv.DeepCopy())
		if dv.Annotations == nil {
			dv.Annotations = map[string]string{}
		}
		dv.Annotations[annCloneType] = cloneType
		status := dv.Status
		if err := s.client.Patch(ctx, dv, patch); err != nil {
			return reconcile.Result{}, err
		}
		dv.Status = status
	}
	return reconcile.Result{}, s.complete(ctx, dv, target, source.Annotations[ContentAnnotation])
}

// populated: a claim made by CDI holds data once its DataVolume finished;
// any other bound claim is taken as it is.
func populated(pvc *corev1.PersistentVolumeClaim) bool {
	if _, ok := pvc.Annotations[ContentAnnotation]; ok {
		return true
	}
	owner := metav1.GetControllerOf(pvc)
	return pvc.Status.Phase == corev1.ClaimBound && (owner == nil || owner.Kind != "DataVolume")
}

// chooseCloneStrategy picks the strategy as CDI does and returns the
// fallback reason when a smart strategy had to fall back to a host-assisted
// copy (docs/kubevirt-behaviour.md#how-cdi-chooses-a-clone-strategy).
func (s *Simulator) chooseCloneStrategy(ctx context.Context, source, target *corev1.PersistentVolumeClaim) (cdiv1.CDICloneStrategy, string, error) {
	strategy := cdiv1.CloneStrategySnapshot
	cdis := &cdiv1.CDIList{}
	if err := s.client.List(ctx, cdis); err == nil && len(cdis.Items) > 0 && cdis.Items[0].Spec.CloneStrategyOverride != nil {
		strategy = *cdis.Items[0].Spec.CloneStrategyOverride
	} else {
		sp := &cdiv1.StorageProfile{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: deref(target.Spec.StorageClassName)}, sp); err == nil && sp.Status.CloneStrategy != nil {
			strategy = *sp.Status.CloneStrategy
		}
	}
	if strategy == cdiv1.CloneStrategyHostAssisted {
		return strategy, "", nil
	}
	srcClass, tgtClass := &storagev1.StorageClass{}, &storagev1.StorageClass{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: deref(source.Spec.StorageClassName)}, srcClass); err != nil {
		return cdiv1.CloneStrategyHostAssisted, "source storage class not found", client.IgnoreNotFound(err)
	}
	if err := s.client.Get(ctx, types.NamespacedName{Name: deref(target.Spec.StorageClassName)}, tgtClass); err != nil {
		return "", "", err
	}
	srcSize, tgtSize := source.Spec.Resources.Requests[corev1.ResourceStorage], target.Spec.Resources.Requests[corev1.ResourceStorage]
	switch {
	case srcClass.Provisioner != tgtClass.Provisioner:
		return cdiv1.CloneStrategyHostAssisted, "the source and target storage classes use different provisioners", nil
	case volumeMode(source) != volumeMode(target):
		return cdiv1.CloneStrategyHostAssisted, "the source and target volume modes differ", nil
	case tgtSize.Cmp(srcSize) > 0 && (tgtClass.AllowVolumeExpansion == nil || !*tgtClass.AllowVolumeExpansion):
		return cdiv1.CloneStrategyHostAssisted, "the target is larger than the source and its storage class cannot expand", nil
	}
	if strategy == cdiv1.CloneStrategySnapshot {
		ok, err := s.hasSnapshotClass(ctx, tgtClass.Provisioner)
		if err != nil {
			return "", "", err
		}
		if !ok {
			return cdiv1.CloneStrategyHostAssisted, "no VolumeSnapshotClass for the provisioner", nil
		}
	}
	return strategy, "", nil
}

func volumeMode(pvc *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if pvc.Spec.VolumeMode == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *pvc.Spec.VolumeMode
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

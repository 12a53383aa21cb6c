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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Import URLs containing these words fail as CDI fails on them: retried with
// a growing restart count, never Succeeded.
const (
	FailUnreachable = "unreachable"
	FailBadImage    = "bad-image"
)

const annTransferStart = "sim.capkv.io/transfer-start"

func (s *Simulator) setupDataVolumeController(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-datavolume").
		For(&cdiv1.DataVolume{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		// A clone waits for its source claim; any claim change may unblock one.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(s.clonesOfClaim)).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileDataVolume))
}

// reconcileDataVolume plays CDI for one DataVolume
// (docs/kubevirt-behaviour.md#cdi-imports-and-clones).
func (s *Simulator) reconcileDataVolume(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	dv := &cdiv1.DataVolume{}
	if err := s.client.Get(ctx, req.NamespacedName, dv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !dv.DeletionTimestamp.IsZero() || dv.Status.Phase == cdiv1.Succeeded {
		return reconcile.Result{}, nil
	}
	before := dv.Status.DeepCopy()
	res, err := s.advanceDataVolume(ctx, dv)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !equality.Semantic.DeepEqual(before, &dv.Status) {
		if err := s.client.Status().Update(ctx, dv); err != nil {
			return reconcile.Result{}, err
		}
	}
	return res, nil
}

func (s *Simulator) advanceDataVolume(ctx context.Context, dv *cdiv1.DataVolume) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := s.client.Get(ctx, client.ObjectKeyFromObject(dv), pvc)
	if apierrors.IsNotFound(err) {
		if dv.Spec.Source != nil && (dv.Spec.Source.PVC != nil) {
			if ok, err := s.sourceExists(ctx, dv); err != nil || !ok {
				return reconcile.Result{}, err
			}
		}
		pvc, err = s.claimFor(ctx, dv)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := s.client.Create(ctx, pvc); err != nil {
			return reconcile.Result{}, err
		}
		dv.Status.Phase = cdiv1.Pending
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		sc := &storagev1.StorageClass{}
		if pvc.Spec.StorageClassName != nil {
			_ = s.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc)
		}
		wffc := sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		if wffc && pvc.Annotations[annImmediateBinding] == "" && pvc.Annotations[annSelectedNode] == "" {
			dv.Status.Phase = cdiv1.WaitForFirstConsumer
		} else {
			dv.Status.Phase = cdiv1.Pending
		}
		setDVCondition(dv, cdiv1.DataVolumeBound, corev1.ConditionFalse, "Pending", "PVC "+pvc.Name+" Pending")
		return reconcile.Result{}, nil
	}
	setDVCondition(dv, cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", "PVC "+pvc.Name+" Bound")
	src := dv.Spec.Source
	switch {
	case src == nil || src.Blank != nil:
		return reconcile.Result{}, s.complete(ctx, dv, pvc, "blank")
	case src.PVC != nil:
		return s.clone(ctx, dv, pvc)
	default:
		return s.importData(ctx, dv, pvc)
	}
}

// claimFor builds the claim of a DataVolume: size, class (or the default
// class), access and volume mode from the spec or the StorageProfile.
func (s *Simulator) claimFor(ctx context.Context, dv *cdiv1.DataVolume) (*corev1.PersistentVolumeClaim, error) {
	spec := corev1.PersistentVolumeClaimSpec{}
	switch {
	case dv.Spec.PVC != nil:
		spec = *dv.Spec.PVC.DeepCopy()
	case dv.Spec.Storage != nil:
		st := dv.Spec.Storage
		spec = corev1.PersistentVolumeClaimSpec{AccessModes: st.AccessModes, VolumeMode: st.VolumeMode,
			StorageClassName: st.StorageClassName, Resources: st.Resources, Selector: st.Selector}
	}
	if spec.StorageClassName == nil {
		name, err := s.defaultStorageClass(ctx)
		if err != nil {
			return nil, err
		}
		spec.StorageClassName = &name
	}
	if len(spec.AccessModes) == 0 {
		spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(s.opts.ImageSize, resource.BinarySI)}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dv.Name, Namespace: dv.Namespace, Labels: map[string]string{"app": "containerized-data-importer"},
			Annotations: map[string]string{}},
		Spec: spec,
	}
	if v, ok := dv.Annotations[annImmediateBinding]; ok {
		pvc.Annotations[annImmediateBinding] = v
	}
	return pvc, controllerutil.SetControllerReference(dv, pvc, s.client.Scheme())
}

func (s *Simulator) defaultStorageClass(ctx context.Context) (string, error) {
	list := &storagev1.StorageClassList{}
	if err := s.client.List(ctx, list); err != nil {
		return "", err
	}
	for _, sc := range list.Items {
		if sc.Annotations[annDefaultClass] == "true" {
			return sc.Name, nil
		}
	}
	return "", fmt.Errorf("no default storage class")
}

// importData downloads at the configured rate: ImportScheduled, then
// ImportInProgress with progress, then Succeeded; unreachable or bad images
// are retried with a growing restart count
// (docs/kubevirt-behaviour.md#import-phases-and-retries).
func (s *Simulator) importData(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) (reconcile.Result, error) {
	url := importURL(dv.Spec.Source)
	if strings.Contains(url, FailUnreachable) || strings.Contains(url, FailBadImage) {
		reason, msg := "Error", fmt.Sprintf("Unable to connect to http data source: Get %q: dial tcp: lookup failed: no such host", url)
		if strings.Contains(url, FailBadImage) {
			msg = "Unable to process data: Unable to transfer source data to target file: unknown image format"
		}
		dv.Status.Phase = cdiv1.ImportInProgress
		dv.Status.RestartCount++
		progress := cdiv1.DataVolumeProgress("N/A")
		dv.Status.Progress = progress
		setDVCondition(dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, reason, msg)
		setDVCondition(dv, cdiv1.DataVolumeReady, corev1.ConditionFalse, "TransferRunning", "")
		s.warn(ctx, dv, reason, msg)
		backoff := time.Duration(min(dv.Status.RestartCount, 6)) * 10 * time.Second
		return reconcile.Result{RequeueAfter: s.scaled(backoff) + time.Millisecond}, nil
	}
	start, started, err := s.transferStart(ctx, pvc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if started {
		s.Counters.Add(Imports, 1)
	}
	total := s.scaled(time.Duration(float64(s.opts.ImageSize) / float64(s.opts.ImportBytesPerSecond) * float64(time.Second)))
	elapsed := time.Since(start)
	if elapsed < total {
		dv.Status.Phase = cdiv1.ImportInProgress
		dv.Status.Progress = cdiv1.DataVolumeProgress(fmt.Sprintf("%.2f%%", 100*float64(elapsed)/float64(total)))
		setDVCondition(dv, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "Pod is running", "")
		setDVCondition(dv, cdiv1.DataVolumeReady, corev1.ConditionFalse, "TransferRunning", "")
		return reconcile.Result{RequeueAfter: min(total-elapsed, s.scaled(10*time.Second)+time.Millisecond)}, nil
	}
	s.Counters.Add(ImportBytes, s.opts.ImageSize)
	return reconcile.Result{}, s.complete(ctx, dv, pvc, url)
}

func importURL(src *cdiv1.DataVolumeSource) string {
	switch {
	case src.HTTP != nil:
		return src.HTTP.URL
	case src.Registry != nil && src.Registry.URL != nil:
		return *src.Registry.URL
	case src.S3 != nil:
		return src.S3.URL
	case src.GCS != nil:
		return src.GCS.URL
	}
	return "unknown-source"
}

// transferStart records when the transfer of a claim started, on the claim,
// and reports whether this call started it. The optimistic lock makes a
// stale read fail instead of starting (and counting) a transfer twice.
func (s *Simulator) transferStart(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (time.Time, bool, error) {
	if v, ok := pvc.Annotations[annTransferStart]; ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, false, err
	}
	now := time.Now()
	patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[annTransferStart] = now.Format(time.RFC3339Nano)
	if err := s.client.Patch(ctx, pvc, patch); err != nil {
		return time.Time{}, false, err
	}
	return now, true, nil
}

// complete marks the data in place: the claim records what it holds, the
// DataVolume is Succeeded.
func (s *Simulator) complete(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, content string) error {
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[ContentAnnotation] = content
	if err := s.client.Patch(ctx, pvc, patch); err != nil {
		return err
	}
	dv.Status.Phase = cdiv1.Succeeded
	dv.Status.Progress = "100.0%"
	setDVCondition(dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "Completed", "")
	setDVCondition(dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "")
	return nil
}

func setDVCondition(dv *cdiv1.DataVolume, t cdiv1.DataVolumeConditionType, status corev1.ConditionStatus, reason, message string) {
	for i := range dv.Status.Conditions {
		c := &dv.Status.Conditions[i]
		if c.Type == t {
			if c.Status != status {
				c.LastTransitionTime = metav1.Now()
			}
			c.Status, c.Reason, c.Message = status, reason, message
			return
		}
	}
	dv.Status.Conditions = append(dv.Status.Conditions, cdiv1.DataVolumeCondition{Type: t, Status: status, Reason: reason,
		Message: message, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
}

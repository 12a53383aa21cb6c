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

package goldenkeeper

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// Collector deletes golden volumes a retention period after their last
// user is gone, and keeps their state and finished imports in the metrics.
type Collector struct {
	// Retention is how long an unused golden volume is kept, so that a
	// machine recreated soon after does not download the image again.
	Retention time.Duration
	// Imports notices finished imports for the metrics; nil counts none.
	Imports *Imports
}

// Collect looks at golden volume dv on the infra cluster c, which users
// machines, templates and pools name in their status; volume names it in
// the metrics. It marks the volume unused-since when its last user left,
// unmarks it when one comes back, and deletes it once the retention is
// over. It returns when to look again.
func (r *Collector) Collect(ctx context.Context, c client.Client, dv *cdiv1.DataVolume, users int, volume string) (time.Duration, error) {
	r.countImport(dv)
	metrics.GoldenImageVolumes.Set(volume, State(dv, users))
	since, marked := dv.Annotations[goldenplan.UnusedSinceAnnotation]
	switch {
	case users > 0 && marked:
		return 0, mark(ctx, c, dv, "")
	case users > 0:
		return 0, nil
	case !marked:
		return r.Retention, mark(ctx, c, dv, time.Now().UTC().Format(time.RFC3339))
	}
	unusedSince, err := time.Parse(time.RFC3339, since)
	if err != nil {
		// Someone edited it: start the retention over.
		return r.Retention, mark(ctx, c, dv, time.Now().UTC().Format(time.RFC3339))
	}
	if wait := time.Until(unusedSince.Add(r.Retention)); wait > 0 {
		return wait, nil
	}
	// Conditional on the version seen: a machine claiming the volume back
	// changes it, and the delete then fails and is retried.
	if err := c.Delete(ctx, dv, client.Preconditions{UID: &dv.UID, ResourceVersion: &dv.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("deleting unused golden volume %s: %w", client.ObjectKeyFromObject(dv), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted unused golden volume", "dataVolume", client.ObjectKeyFromObject(dv), "unusedSince", since)
	metrics.GoldenImageVolumesCollected.Inc()
	metrics.GoldenImageVolumes.Forget(volume)
	if r.Imports != nil {
		r.Imports.Forget(dv.UID)
	}
	return 0, nil
}

// countImport observes a golden volume's import once it finished.
func (r *Collector) countImport(dv *cdiv1.DataVolume) {
	if r.Imports == nil {
		return
	}
	if imp, ok := r.Imports.Finished(dv); ok {
		metrics.GoldenImageImports.Inc()
		metrics.GoldenImageImportSeconds.Observe(imp.Seconds)
		metrics.GoldenImageImportBytes.Add(float64(imp.Bytes))
	}
}

// mark sets (or with "" removes) the unused-since annotation.
func mark(ctx context.Context, c client.Client, dv *cdiv1.DataVolume, since string) error {
	before := dv.DeepCopy()
	if since == "" {
		delete(dv.Annotations, goldenplan.UnusedSinceAnnotation)
	} else {
		if dv.Annotations == nil {
			dv.Annotations = map[string]string{}
		}
		dv.Annotations[goldenplan.UnusedSinceAnnotation] = since
	}
	return c.Patch(ctx, dv, client.MergeFrom(before))
}

// Clones counts the DataVolumes of the golden volume's namespace cloned
// from it, from the infra cluster's cache.
func Clones(ctx context.Context, c client.Client, volume types.NamespacedName) (int, error) {
	dvs := &cdiv1.DataVolumeList{}
	if err := c.List(ctx, dvs, client.InNamespace(volume.Namespace)); err != nil {
		return 0, err
	}
	n := 0
	for i := range dvs.Items {
		if source := CloneSource(&dvs.Items[i]); source != nil && *source == volume {
			n++
		}
	}
	return n, nil
}

// CloneSource is the PVC a DataVolume is cloned from, nil for any other.
func CloneSource(dv *cdiv1.DataVolume) *types.NamespacedName {
	if dv.Spec.Source == nil || dv.Spec.Source.PVC == nil {
		return nil
	}
	ns := dv.Spec.Source.PVC.Namespace
	if ns == "" {
		ns = dv.Namespace
	}
	return &types.NamespacedName{Namespace: ns, Name: dv.Spec.Source.PVC.Name}
}

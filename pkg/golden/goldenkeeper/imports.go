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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// Import is a finished import of a golden volume.
type Import struct {
	// Seconds from the volume's creation until CDI reported it ready.
	Seconds float64
	// Bytes is the volume's requested size.
	Bytes int64
}

// Imports notices finished imports once each, for the metrics. Imports
// that finished before it started (seen again after a restart) are not
// reported.
type Imports struct {
	since time.Time

	mu   sync.Mutex
	seen map[types.UID]bool
}

// NewImports reports imports that finish from since on.
func NewImports(since time.Time) *Imports {
	return &Imports{since: since, seen: map[types.UID]bool{}}
}

// Finished returns the import of dv if it finished and was not reported
// before.
func (i *Imports) Finished(dv *cdiv1.DataVolume) (Import, bool) {
	if dv.Status.Phase != cdiv1.Succeeded {
		return Import{}, false
	}
	var done time.Time
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady && c.Status == corev1.ConditionTrue {
			done = c.LastTransitionTime.Time
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.seen[dv.UID] || done.IsZero() || done.Before(i.since) {
		return Import{}, false
	}
	i.seen[dv.UID] = true
	size := goldenplan.Size(dv)
	return Import{Seconds: done.Sub(dv.CreationTimestamp.Time).Seconds(), Bytes: size.Value()}, true
}

// Forget drops a deleted volume.
func (i *Imports) Forget(uid types.UID) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.seen, uid)
}

// State is where a golden volume stands for the capkv_golden_image_volumes
// gauge: its import under way, retried by CDI (the importer pod failed and
// restarts: an unreachable URL, an unknown image format), failed, or, once
// imported, used by users machines and templates or unused.
func State(dv *cdiv1.DataVolume, users int) string {
	switch {
	case dv.Status.Phase == cdiv1.Failed:
		return metrics.GoldenImportFailed
	case dv.Status.Phase == cdiv1.Succeeded && users > 0:
		return metrics.GoldenInUse
	case dv.Status.Phase == cdiv1.Succeeded:
		return metrics.GoldenUnused
	case dv.Status.RestartCount > 0:
		return metrics.GoldenImportRetrying
	}
	return metrics.GoldenImporting
}

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

// Package goldenkeeper is the one service that keeps golden volumes on the
// infra cluster, for the machines, pools and clusters whose root disks
// clone them and for the golden image controller: it names the volume in
// its user's status, creates it (again, when it went before its clone) and
// reports its import, checks that a VM may clone a root disk from another
// namespace, counts a volume's clones, and deletes a volume a retention
// period after its last user, noticing finished imports for the metrics.
// What the volumes are is pkg/golden/goldenplan's to plan.
package goldenkeeper

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// Use names the golden volume of rd in a user's status.goldenImage (a
// KubevirtMachine's or KubevirtMachinePool's). When that changes the name,
// it returns true and the wait to report: the status must be saved before
// the volume is touched, as the golden image controller counts users from
// status; the status patch brings the user back.
func Use(status **infrav1.GoldenImageStatus, infraSecret types.NamespacedName, ns string, rd *infrav1.RootDiskSpec) (outcome.Outcome, bool) {
	ref := goldenplan.StatusOf(infraSecret, ns, rd)
	if equality.Semantic.DeepEqual(*status, ref) {
		return outcome.Outcome{}, false
	}
	*status = ref
	return outcome.Wait(infrav1.WaitingForGoldenImageReason,
		fmt.Sprintf("using golden volume %s/%s for %s", ref.Namespace, ref.Name, goldenplan.Describe(&rd.Image))), true
}

// Ensure makes sure the golden volume of rd in namespace ns exists on the
// infra cluster c, and returns it once its import succeeded. user, a
// KubevirtMachine or KubevirtMachinePool whose root disk clones the volume,
// must already name it in its saved status, where the golden image
// controller counts users; events about the volume go to it. Until then the
// outcome carries CDI's progress or error; recheck is when to look again
// where no event says (a refusal by the infra API, a size mismatch fixed in
// other objects).
func Ensure(ctx context.Context, c client.Client, recorder events.EventRecorder, user outcome.Object, rd *infrav1.RootDiskSpec, ns string, recheck time.Duration) (*types.NamespacedName, outcome.Outcome, error) {
	want := goldenplan.DataVolume(rd, ns)
	key := client.ObjectKeyFromObject(want)
	dv := &cdiv1.DataVolume{}
	err := c.Get(ctx, key, dv)
	if apierrors.IsNotFound(err) {
		importing := outcome.Wait(infrav1.WaitingForGoldenImageReason,
			fmt.Sprintf("importing %s into golden volume %s", goldenplan.Describe(&rd.Image), key))
		err := c.Create(ctx, want)
		switch {
		case apierrors.IsAlreadyExists(err):
			// Another machine's reconcile created it a moment ago (the
			// cache has not seen it yet): only the creator says so.
			return nil, importing, nil
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			// Nothing announces a change of the infra API's mind.
			return nil, outcome.Fail(infrav1.GoldenImageFailedReason,
				fmt.Sprintf("the infra cluster refused golden volume %s: %v", key, err)).After(recheck), nil
		case err != nil:
			return nil, outcome.Outcome{}, fmt.Errorf("creating golden volume %s: %w", key, err)
		}
		recorder.Eventf(user, nil, corev1.EventTypeNormal, "GoldenImageCreated", "ImportGoldenImage",
			"importing %s once into golden volume %s", goldenplan.Describe(&rd.Image), key)
		return nil, importing, nil
	}
	if err != nil {
		return nil, outcome.Outcome{}, err
	}
	if dv.Labels[goldenplan.Label] != "true" {
		return nil, outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"DataVolume %s exists but is not a golden volume of the provider", key)), nil
	}
	if !dv.DeletionTimestamp.IsZero() {
		return nil, outcome.Wait(infrav1.WaitingForGoldenImageReason,
			fmt.Sprintf("golden volume %s is being deleted; it will be imported again", key)), nil
	}
	if size := goldenplan.Size(dv); size.Cmp(rd.DiskSize) > 0 {
		// The fix is in other objects' templates, which this one does not
		// watch.
		return nil, outcome.Fail(infrav1.GoldenImageFailedReason, fmt.Sprintf(
			"golden volume %s is %s, larger than this machine's diskSize %s; a clone cannot be smaller than its source: set rootDisk.imageSize on the templates sharing the image",
			key, size.String(), rd.DiskSize.String())).After(recheck), nil
	}
	switch dv.Status.Phase {
	case cdiv1.Succeeded:
		if _, unused := dv.Annotations[goldenplan.UnusedSinceAnnotation]; unused {
			// Claim it back before cloning, so that the golden image
			// controller, whose delete is conditional on the version it saw,
			// cannot delete it under this clone.
			before := dv.DeepCopy()
			delete(dv.Annotations, goldenplan.UnusedSinceAnnotation)
			if err := c.Patch(ctx, dv, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return nil, outcome.Outcome{}, fmt.Errorf("claiming golden volume %s: %w", key, err)
			}
		}
		return &key, outcome.Outcome{}, nil
	case cdiv1.Failed:
		return nil, outcome.Fail(infrav1.GoldenImageFailedReason, fmt.Sprintf(
			"importing %s into golden volume %s failed: %s; delete the volume to try again", goldenplan.Describe(&rd.Image), key, vmstatus.DataVolumeMessage(dv))), nil
	}
	st, _ := vmstatus.Disk(dv)
	if st.Message == "" {
		st.Message = "DataVolume " + dv.Name + " is " + string(dv.Status.Phase)
	}
	o := outcome.Wait(infrav1.WaitingForGoldenImageReason, fmt.Sprintf("waiting for golden image %s: %s", goldenplan.Describe(&rd.Image), st.Message))
	if st.Warning {
		o.State = outcome.Failed
	}
	return nil, o, nil
}

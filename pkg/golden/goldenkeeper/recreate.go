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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// Recreate re-creates the golden volume of root disk rd in namespace ns
// when it is gone, for a user whose VM exists but whose root disk has not
// been cloned yet: the clone would otherwise wait for its source forever.
// It records an Event on the user when it does.
func Recreate(ctx context.Context, c client.Client, recorder events.EventRecorder, user runtime.Object, rd *infrav1.RootDiskSpec, ns string) error {
	want := goldenplan.DataVolume(rd, ns)
	key := client.ObjectKeyFromObject(want)
	err := c.Get(ctx, key, &cdiv1.DataVolume{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading golden volume %s: %w", key, err)
	}
	if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("re-creating golden volume %s: %w", key, err)
	}
	recorder.Eventf(user, nil, corev1.EventTypeNormal, "GoldenImageCreated", "ImportGoldenImage",
		"golden volume %s was gone before this machine's root disk was cloned; importing %s again", key, goldenplan.Describe(&rd.Image))
	return nil
}

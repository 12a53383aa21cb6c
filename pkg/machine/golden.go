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

package machine

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// goldenVolume makes sure the golden volume of the machine's root disk
// exists, and returns it once its import succeeded. Until then the outcome
// carries CDI's progress or error, and no VM is created: a VM whose disk
// cannot be made would only fail later.
func (s *Service) goldenVolume(ctx context.Context, sc *Scope) (*types.NamespacedName, outcome.Outcome, error) {
	km := sc.KubevirtMachine
	rd := km.Spec.RootDisk
	if !goldenplan.Needed(rd) {
		return nil, outcome.Outcome{}, nil
	}
	ns := sc.VM.Namespace
	if wait, changed := goldenkeeper.Use(&km.Status.GoldenImage, sc.Access.Infra.Secret, ns, rd); changed && !s.templateUses(ctx, km, km.Status.GoldenImage) {
		// The status naming the volume is written at once.
		s.Status.WriteNow(client.ObjectKeyFromObject(km))
		return nil, wait, nil
	}
	return goldenkeeper.Ensure(ctx, sc.Access.Infra.Client, s.Recorder, km, rd, ns, s.recheck())
}

// ClonedFromTemplate is the name of the KubevirtMachineTemplate Cluster
// API cloned o from (in o's namespace), empty for a machine made otherwise.
func ClonedFromTemplate(o metav1.Object) string {
	if o.GetAnnotations()[clusterv1.TemplateClonedFromGroupKindAnnotation] != infrav1.GroupVersion.WithKind("KubevirtMachineTemplate").GroupKind().String() {
		return ""
	}
	return o.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
}

// templateUses reports whether the KubevirtMachineTemplate the machine was
// cloned from names the golden volume in its status: the golden image
// controller then counts it as used already, and the machine's own claim
// can go with its next status write instead of a write of its own.
func (s *Service) templateUses(ctx context.Context, km *infrav1.KubevirtMachine, ref *infrav1.GoldenImageStatus) bool {
	name := ClonedFromTemplate(km)
	if name == "" {
		return false
	}
	t := &infrav1.KubevirtMachineTemplate{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: km.Namespace, Name: name}, t); err != nil {
		return false
	}
	return t.DeletionTimestamp.IsZero() && equality.Semantic.DeepEqual(t.Status.GoldenImage, ref)
}

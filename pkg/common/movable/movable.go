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

// Package movable keeps what a tenant cluster needs on the management cluster
// movable by clusterctl move: a Secret referenced only by name (an infra
// cluster kubeconfig, network data) has no owner in the cluster's tree, so
// clusterctl would leave it behind and the target's provider could not
// reach the infra cluster.
package movable

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Label makes clusterctl move an object with the clusters of its
// namespace (clusterctl's "force move"), without an owner that the garbage
// collector would act on.
const Label = "clusterctl.cluster.x-k8s.io/move"

// Labelled reports whether the object carries Label.
func Labelled(obj client.Object) bool {
	_, ok := obj.GetLabels()[Label]
	return ok
}

// KeepWithClusters adds Label to a Secret a tenant object references in
// its own namespace, once: a merge patch of the label alone, so nothing
// else of the user's Secret is touched. Secrets in other namespaces are
// left alone; clusterctl move moves one namespace, and docs/move.md tells
// users to copy those first.
func KeepWithClusters(ctx context.Context, c client.Client, secret *corev1.Secret, objectNamespace string) error {
	if secret.Namespace != objectNamespace || Labelled(secret) {
		return nil
	}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:""}}}`, Label))
	target := &corev1.Secret{}
	target.Namespace, target.Name = secret.Namespace, secret.Name
	if err := c.Patch(ctx, target, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("labelling Secret %s/%s for clusterctl move: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// BlockAnnotation stops clusterctl move before it creates anything on the
// target management cluster, for as long as an object of the move carries
// it; clusterctl waits about two minutes, then fails naming the object.
const BlockAnnotation = "clusterctl.cluster.x-k8s.io/block-move"

// BlockedLocalInfra is the value of BlockAnnotation on a KubevirtCluster
// whose VMs run on the management cluster itself: they cannot follow the
// cluster to another management cluster.
const BlockedLocalInfra = "the infra cluster is this management cluster: its VMs cannot move to another one (docs/move.md)"

// BlockIfLocalInfra sets BlockAnnotation on a tenant object whose infra
// cluster is the management cluster (no infraClusterSecretRef), and removes
// the value it set once the object names an external infra cluster. It
// reports whether it changed the object.
func BlockIfLocalInfra(obj client.Object, localInfra bool) bool {
	annotations := obj.GetAnnotations()
	current, set := annotations[BlockAnnotation]
	switch {
	case localInfra && !set:
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[BlockAnnotation] = BlockedLocalInfra
	case !localInfra && set && current == BlockedLocalInfra:
		delete(annotations, BlockAnnotation)
	default:
		return false
	}
	obj.SetAnnotations(annotations)
	return true
}

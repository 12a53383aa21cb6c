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

// Package tenantdrain cordons and drains a tenant cluster's Node through the
// Eviction API, as kubectl drain does, so that the tenant's
// PodDisruptionBudgets are respected before its VM leaves an infra node.
package tenantdrain

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CordonedAnnotation marks a tenant Node the provider cordoned, so that it
// uncordons only what it cordoned and never a Node an admin cordoned.
const CordonedAnnotation = "capkv.io/cordoned-for-evacuation"

// mirrorPodAnnotation marks the kubelet's mirror of a static pod, which
// the API cannot evict.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Cordon marks the Node unschedulable; it reports whether it did (false
// when the Node was already unschedulable, cordoned by someone else).
func Cordon(ctx context.Context, c client.Client, node *corev1.Node) (bool, error) {
	if node.Spec.Unschedulable {
		return false, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = true
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[CordonedAnnotation] = "true"
	if err := c.Patch(ctx, node, patch); err != nil {
		return false, fmt.Errorf("cordoning tenant Node %s: %w", node.Name, err)
	}
	return true, nil
}

// Uncordon makes a Node this package cordoned schedulable again; a Node
// without the mark is left alone.
func Uncordon(ctx context.Context, c client.Client, node *corev1.Node) error {
	if _, ok := node.Annotations[CordonedAnnotation]; !ok {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = false
	delete(node.Annotations, CordonedAnnotation)
	if err := c.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("uncordoning tenant Node %s: %w", node.Name, err)
	}
	return nil
}

// Result is where a drain stands.
type Result struct {
	// Remaining are the pods still on the Node that a drain must move,
	// including those shutting down.
	Remaining []string
	// Blocked are the pods whose eviction the API refused for now, because
	// a PodDisruptionBudget allows no disruption.
	Blocked []string
}

// Done says whether nothing is left to move.
func (r Result) Done() bool { return len(r.Remaining) == 0 }

// Drain asks for the eviction of every pod on the Node that a drain moves
// (see Evictable) and reports what is left. It is called again until Done:
// each call evicts what it can, as kubectl drain retries.
func Drain(ctx context.Context, c client.Client, nodeName string) (Result, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.MatchingFields{"spec.nodeName": nodeName}); err != nil {
		return Result{}, fmt.Errorf("listing the pods of tenant Node %s: %w", nodeName, err)
	}
	var r Result
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !Evictable(pod) {
			continue
		}
		name := pod.Namespace + "/" + pod.Name
		r.Remaining = append(r.Remaining, name)
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		err := c.SubResource("eviction").Create(ctx, pod, eviction)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			r.Blocked = append(r.Blocked, name)
		default:
			return r, fmt.Errorf("evicting pod %s from tenant Node %s: %w", name, nodeName, err)
		}
	}
	slices.Sort(r.Remaining)
	slices.Sort(r.Blocked)
	return r, nil
}

// Evictable says whether a drain moves the pod: not a DaemonSet's (it
// would come back at once, and tolerates the cordon), not a static pod's
// mirror, and not finished.
func Evictable(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		return false
	}
	owner := metav1.GetControllerOf(pod)
	return owner == nil || owner.Kind != "DaemonSet"
}

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

// Package tenantdrain cordons and drains a tenant cluster's Node with
// kubectl's drain library, through the Eviction API, so that the tenant's
// PodDisruptionBudgets are respected before its VM leaves an infra node.
package tenantdrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CordonedAnnotation marks a tenant Node the provider cordoned, so that it
// uncordons only what it cordoned and never a Node an admin cordoned.
const CordonedAnnotation = "capkv.io/cordoned-for-evacuation"

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
	// Blocked are the pods whose eviction the API refused for now, each
	// with the reason, which names the PodDisruptionBudget.
	Blocked []string
}

// Done says whether nothing is left to move.
func (r Result) Done() bool { return len(r.Remaining) == 0 }

// Drain evicts, with kubectl's drain helper, the pods that
// `kubectl drain --ignore-daemonsets --delete-emptydir-data --force` moves
// (not DaemonSet pods, not static pods' mirrors), and reports what is
// left. Unlike kubectl drain it does not wait: it is called again until
// Done, and each call evicts what it can.
func Drain(ctx context.Context, cs kubernetes.Interface, nodeName string) (Result, error) {
	h := &drain.Helper{Ctx: ctx, Client: cs, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Out: io.Discard, ErrOut: io.Discard}
	list, errs := h.GetPodsForDeletion(nodeName)
	if len(errs) > 0 {
		return Result{}, fmt.Errorf("listing the pods to evict from tenant Node %s: %w", nodeName, utilerrors.NewAggregate(errs))
	}
	var r Result
	for _, pod := range list.Pods() {
		name := pod.Namespace + "/" + pod.Name
		r.Remaining = append(r.Remaining, name)
		if pod.DeletionTimestamp != nil {
			continue
		}
		err := h.EvictPod(pod, policyv1.SchemeGroupVersion)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			r.Blocked = append(r.Blocked, name+" ("+refusal(err)+")")
		default:
			return r, fmt.Errorf("evicting pod %s from tenant Node %s: %w", name, nodeName, err)
		}
	}
	slices.Sort(r.Remaining)
	slices.Sort(r.Blocked)
	return r, nil
}

// refusal is why the API refused an eviction: the PodDisruptionBudget's
// own words when a budget refused it ("The disruption budget web needs 2
// healthy pods and has 2 currently"), else the error.
func refusal(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
				return c.Message
			}
		}
	}
	return err.Error()
}

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
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UnexpectedAdmissionError is the reason a kubelet gives a pod it rejects
// at admission for want of a device (k8s.io/kubernetes
// pkg/kubelet/lifecycle/predicate.go).
const UnexpectedAdmissionError = "UnexpectedAdmissionError"

// devicesShort is the kubelet's device manager admitting a pod: every
// device plugin resource the pod asks for must have that many devices not
// held by the node's other admitted pods. The scheduler fits pods to the
// same counts, so this refuses only a pod bound past the scheduler or one
// that raced another onto the node; a real kubelet then fails the pod with
// UnexpectedAdmissionError and the message returned here
// (docs/kubevirt-behaviour.md#gpus-and-host-devices). Empty means the pod
// fits. unseen is true when the simulator's cache does not show the node,
// or not the resource on it, yet: a real kubelet knows its own node, so
// the pod is looked at again rather than refused.
func (s *Simulator) devicesShort(ctx context.Context, pod *corev1.Pod) (short string, unseen bool, err error) {
	want := deviceRequests(pod)
	if len(want) == 0 {
		return "", false, nil
	}
	node := &corev1.Node{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return "", apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	for name := range want {
		if _, ok := node.Status.Allocatable[name]; !ok {
			return "", true, nil
		}
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods); err != nil {
		return "", false, err
	}
	held := map[corev1.ResourceName]int64{}
	for i := range pods.Items {
		other := &pods.Items[i]
		// The simulated kubelet admits and starts a pod in one step, so
		// the admitted pods are the running ones; a pod that ended has
		// given its devices back.
		if other.UID == pod.UID || other.Spec.NodeName != node.Name || other.Status.Phase != corev1.PodRunning {
			continue
		}
		for name, n := range deviceRequests(other) {
			held[name] += n
		}
	}
	names := make([]corev1.ResourceName, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		q := node.Status.Allocatable[name]
		free := max(q.Value()-held[name], 0)
		if want[name] > free {
			return fmt.Sprintf("Allocate failed due to requested number of devices unavailable for %s. Requested: %d, Available: %d, which is unexpected",
				name, want[name], free), false, nil
		}
	}
	return "", false, nil
}

// deviceRequests sums what the pod's containers ask of device plugin
// resources: extended resources, named domain/name outside the
// kubernetes.io domains. Their requests equal their limits, as the API
// server requires of extended resources.
func deviceRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	sum := map[corev1.ResourceName]int64{}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Limits {
			if isDeviceResource(name) {
				sum[name] += q.Value()
			}
		}
	}
	return sum
}

func isDeviceResource(name corev1.ResourceName) bool {
	domain, _, ok := strings.Cut(string(name), "/")
	return ok && domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io") && !strings.HasPrefix(string(name), "requests.")
}

// rejectPod fails a pod at admission as the kubelet does: phase Failed,
// its reason and "Pod was rejected: " before the message, and a Warning
// Event with both (pkg/kubelet/kubelet.go, rejectPod).
func (s *Simulator) rejectPod(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	s.warn(ctx, pod, reason, message)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason = reason
	pod.Status.Message = "Pod was rejected: " + message
	return client.IgnoreNotFound(s.client.Status().Update(ctx, pod))
}

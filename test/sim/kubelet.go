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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// setupKubelet acts for the kubelet the simulated nodes do not have, on the
// virt-launcher pods the real virt-controller creates and the real
// scheduler binds (docs/simulator.md#the-kubelet): a bound pod starts with
// an IP and running containers; it turns Ready once its containers are
// ready and virt-controller has set its readiness gate; a deleted pod ends
// once its guest has shut down.
func (s *Simulator) setupKubelet(mgr ctrl.Manager) error {
	bound := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isBoundLauncher(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return isBoundLauncher(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return isBoundLauncher(e.Object) },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubelet").
		For(&corev1.Pod{}, builder.WithPredicates(bound)).
		WatchesRawSource(source.Channel(s.kubeletResync, &handler.EnqueueRequestForObject{}, source.WithPredicates[client.Object, reconcile.Request](bound))).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileLauncher))
}

// isBoundLauncher says whether the kubelet has work on a pod: a launcher
// pod bound to a node that has not ended, or is being deleted (a pod that
// ended may still wait for its removal).
func isBoundLauncher(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && pod.Labels[kubevirtv1.AppLabel] == "virt-launcher" && pod.Spec.NodeName != "" &&
		(!pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed)
}

// setupUnrunPods acts for the kubelet on the other pods bound to a node
// that nothing in the world runs (a Deployment whose image the world has
// no binary for, such as the community provider's before the switch): they
// stay Pending, as a pod whose image never starts, and a deleted one is
// removed at once, as a real kubelet removes a pod with no running
// container. Launcher and CDI pods have their own rules; pods the world
// runs (world.PodRunner) are Running and remove themselves.
func (s *Simulator) setupUnrunPods(mgr ctrl.Manager) error {
	deleted := predicate.NewPredicateFuncs(isDeletedUnrunPod)
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubelet-unrun").
		For(&corev1.Pod{}, builder.WithPredicates(deleted)).
		WithOptions(concurrency()).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			pod := &corev1.Pod{}
			if err := s.client.Get(ctx, req.NamespacedName, pod); err != nil || !isDeletedUnrunPod(pod) || s.nodeFailed(pod.Spec.NodeName) {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			err := s.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, err
		}))
}

func isDeletedUnrunPod(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && pod.Spec.NodeName != "" && !pod.DeletionTimestamp.IsZero() &&
		(pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending) &&
		pod.Labels[kubevirtv1.AppLabel] != "virt-launcher" && !isBoundCDIPod(pod)
}

func (s *Simulator) reconcileLauncher(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := s.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isBoundLauncher(pod) || s.nodeFailed(pod.Spec.NodeName) {
		return reconcile.Result{}, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		return s.stopLauncher(ctx, pod)
	}
	before := pod.DeepCopy()
	if pod.Status.Phase != corev1.PodRunning {
		// Admission comes before the sandbox and its networks.
		short, unseen, err := s.devicesShort(ctx, pod)
		switch {
		case err != nil:
			return reconcile.Result{}, err
		case unseen:
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
		case short != "":
			return reconcile.Result{}, s.rejectPod(ctx, pod, UnexpectedAdmissionError, short)
		}
		if missing, err := s.missingNetwork(ctx, pod); err != nil || missing != "" {
			if missing != "" {
				// Multus cannot set up the sandbox; the kubelet retries.
				s.warn(ctx, pod, "FailedCreatePodSandBox", fmt.Sprintf(
					"Failed to create pod sandbox: error adding pod %s to CNI network \"multus-cni-network\": "+
						"cannot find a network-attachment-definition (%s)", pod.Name, missing))
			}
			return reconcile.Result{RequeueAfter: s.scaled(10*time.Second) + 100*time.Millisecond}, err
		}
		if err := s.startPod(ctx, pod); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	s.syncReadiness(pod)
	if equality.Semantic.DeepEqual(before.Status, pod.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, s.client.Status().Update(ctx, pod)
}

// startPod gives the pod an IP, its node's address and running
// containers.
func (s *Simulator) startPod(ctx context.Context, pod *corev1.Pod) error {
	if err := s.ips.seed(func() ([]string, error) { return s.launcherIPs(ctx) }); err != nil {
		return err
	}
	node := &corev1.Node{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return err
	}
	now := metav1.NewTime(time.Now())
	ip := s.ips.podIP()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	// The kubelet reports its node's address as the host IP.
	if hostIP := InternalIP(node); hostIP != "" {
		pod.Status.HostIP, pod.Status.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	}
	pod.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodScheduled} {
		setPodCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Started: new(bool),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
		*pod.Status.ContainerStatuses[len(pod.Status.ContainerStatuses)-1].Started = true
	}
	return nil
}

// syncReadiness sets each container's readiness (a container with a
// readiness probe, which virt-controller renders from the VMI's, passes
// once the guest answers it) and the pod's Ready condition: all
// containers ready and every readiness gate True. virt-controller owns the
// gate kubevirt.io/virtual-machine-unpaused.
func (s *Simulator) syncReadiness(pod *corev1.Pod) {
	probes := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		probes[c.Name] = c.ReadinessProbe != nil
	}
	ready := len(pod.Status.ContainerStatuses) > 0
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready = cs.State.Running != nil && (!probes[cs.Name] || s.probePassed(types.UID(pod.Labels[kubevirtv1.CreatedByLabel])))
		ready = ready && cs.Ready
	}
	now := metav1.Now()
	setPodConditionStatus(pod, corev1.ContainersReady, ready, now)
	for _, g := range pod.Spec.ReadinessGates {
		ready = ready && podConditionTrue(pod, g.ConditionType)
	}
	setPodConditionStatus(pod, corev1.PodReady, ready, now)
}

// probePassed says whether the guest of a VMI answers its readiness probe.
func (s *Simulator) probePassed(vmiUID types.UID) bool {
	passed, _ := s.probes.Load(vmiUID)
	ok, _ := passed.(bool)
	return ok
}

// stopLauncher ends a deleted launcher pod once its guest is down (the VMI
// finished or is gone): its containers exit and the kubelet removes it.
func (s *Simulator) stopLauncher(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Annotations["kubevirt.io/domain"]}, vmi)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	if err == nil && string(vmi.UID) == pod.Labels[kubevirtv1.CreatedByLabel] && !finished(vmi) && vmi.Status.NodeName == pod.Spec.NodeName {
		// virt-handler is still shutting the guest down.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		endPod(pod)
		if err := s.client.Status().Update(ctx, pod); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	err = s.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// launcherIPs are the pod IPs launcher pods already hold, which an earlier
// simulator gave them when the world restarted from kept state.
func (s *Simulator) launcherIPs(ctx context.Context) ([]string, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
		return nil, err
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips, nil
}

// launcherPods are the virt-launcher pods of a VMI on its node.
func (s *Simulator) launcherPods(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) ([]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, err
	}
	var onNode []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; metav1.IsControlledBy(p, vmi) && p.Spec.NodeName == vmi.Status.NodeName {
			onNode = append(onNode, p)
		}
	}
	return onNode, nil
}

// launcherPod finds the running virt-launcher pod of a VMI on its node.
func (s *Simulator) launcherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods, err := s.launcherPods(ctx, vmi)
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, err
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// setPodConditionStatus sets a condition's status, moving its transition
// time only when the status changes.
func setPodConditionStatus(pod *corev1.Pod, t corev1.PodConditionType, status bool, now metav1.Time) {
	want := corev1.ConditionFalse
	if status {
		want = corev1.ConditionTrue
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == want {
			return
		}
	}
	setPodCondition(pod, corev1.PodCondition{Type: t, Status: want, LastTransitionTime: now})
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// imageID is what a container runtime reports as the image a container
// runs: the repository with the digest of the pulled image. virt-controller
// gives a migration target the source's exact image by this digest
// (docs/kubevirt-behaviour.md#live-migration).
func imageID(image string) string {
	repo, digest, found := strings.Cut(image, "@")
	if found {
		return repo + "@" + digest
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	sum := sha256.Sum256([]byte(image))
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

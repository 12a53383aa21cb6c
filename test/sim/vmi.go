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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// handlerDelay is how long virt-handler takes from a ready launcher pod to a
// running domain, before scaling.
const handlerDelay = 5 * time.Second

func (s *Simulator) setupVMIController(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-vmi").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileVMI))
}

// reconcileVMI plays virt-controller and virt-handler for one VMI
// (docs/kubevirt-behaviour.md#virtualmachine-and-vmi-controller-behaviour).
func (s *Simulator) reconcileVMI(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, req.NamespacedName, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			s.stopSSH(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !vmi.DeletionTimestamp.IsZero() || finished(vmi) {
		// The guest is shutting down or off: so is its sshd.
		s.stopSSH(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	before := vmi.DeepCopy()
	pod, err := s.launcherPod(ctx, vmi)
	if err != nil {
		return reconcile.Result{}, err
	}
	var requeue time.Duration
	switch {
	case pod == nil && vmi.Status.Phase != "" && vmi.Status.Phase != kubevirtv1.Pending:
		// The pod is gone after it existed
		// (docs/kubevirt-behaviour.md#vmi-phases).
		vmi.Status.Phase = kubevirtv1.Failed
		setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
			Status: corev1.ConditionFalse, Reason: "PodNotExists", Message: "virt-launcher pod has been deleted"})
	case pod == nil:
		missing, err := s.missingClaims(ctx, vmi)
		if err != nil {
			return reconcile.Result{}, err
		}
		vmi.Status.Phase = kubevirtv1.Pending
		if missing != "" {
			if !hasVMICondition(before, "Synchronized", "FailedPvcNotFound") {
				s.event(ctx, vmi, corev1.EventTypeNormal, "FailedPvcNotFound", fmt.Sprintf("PVC %s/%s does not exist, waiting for it to appear", vmi.Namespace, missing))
			}
			setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: "Synchronized", Status: corev1.ConditionFalse,
				Reason: "FailedPvcNotFound", Message: fmt.Sprintf("PVC %s/%s does not exist", vmi.Namespace, missing)})
			break
		}
		if err := s.createLauncherPod(ctx, vmi); err != nil {
			return reconcile.Result{}, err
		}
		vmi.Status.Phase = kubevirtv1.Scheduling
		setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
			Status: corev1.ConditionFalse, Reason: "GuestNotRunning", Message: "Guest VM is not reported as running"})
	default:
		requeue = s.followPod(vmi, pod)
	}
	if !equality.Semantic.DeepEqual(before.Labels, vmi.Labels) {
		status := vmi.Status
		if err := s.client.Patch(ctx, vmi, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, err
		}
		vmi.Status = status
	}
	if !equality.Semantic.DeepEqual(before.Status, vmi.Status) {
		if err := s.client.Status().Update(ctx, vmi); err != nil {
			return reconcile.Result{}, err
		}
	}
	if vmi.Status.Phase == kubevirtv1.Running {
		return s.bootGuest(ctx, vmi)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// followPod moves the VMI along with its pod: Scheduling until the pod is
// bound and ready, Scheduled with the node, Running after virt-handler's
// delay. It returns how long to wait for the next step.
func (s *Simulator) followPod(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) time.Duration {
	podReady := pod.Spec.NodeName != "" && podConditionTrue(pod, corev1.PodReady)
	switch {
	case !pod.DeletionTimestamp.IsZero():
		if vmi.Status.Phase == kubevirtv1.Running || vmi.Status.Phase == kubevirtv1.Scheduled {
			vmi.Status.Phase = kubevirtv1.Failed
		}
		setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
			Status: corev1.ConditionFalse, Reason: "PodTerminating", Message: "virt-launcher pod is terminating"})
		return 0
	case !podReady:
		vmi.Status.Phase = kubevirtv1.Scheduling
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceConditionType(c.Type),
					Status: c.Status, Reason: c.Reason, Message: c.Message})
			}
		}
		return 0
	case vmi.Status.Phase == kubevirtv1.Scheduling || vmi.Status.Phase == kubevirtv1.Pending:
		vmi.Status.Phase = kubevirtv1.Scheduled
		vmi.Status.NodeName = pod.Spec.NodeName
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[kubevirtv1.NodeNameLabel] = pod.Spec.NodeName
		removeVMICondition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
		return s.scaled(handlerDelay)
	case vmi.Status.Phase == kubevirtv1.Scheduled:
		scheduledFor := time.Since(podConditionTime(pod, corev1.PodReady))
		if wait := s.scaled(handlerDelay) - scheduledFor; wait > 0 {
			return wait
		}
		vmi.Status.Phase = kubevirtv1.Running
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.Now()})
		vmi.Status.Interfaces = s.interfaces(vmi, pod)
		ready := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}
		if vmi.Spec.ReadinessProbe != nil {
			// With a readiness probe, Ready follows the probe; the guest
			// agent answers it once the guest has booted
			// (docs/kubevirt-behaviour.md#ready-and-other-conditions).
			ready = kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
				Status: corev1.ConditionFalse, Reason: "ReadinessProbeNotPassed", Message: "readiness probe has not passed yet"}
		}
		setVMICondition(vmi, ready)
	}
	return 0
}

// interfaces reports one entry per interface: the pod network carries the
// pod IP and comes first; Multus networks get an IP of their own
// (docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
func (s *Simulator) interfaces(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	var pod0, rest []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for i, n := range vmi.Spec.Networks {
		iface := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: n.Name, MAC: fmt.Sprintf("02:00:00:%02x:%02x:%02x", i, len(vmi.Name)%256, vmi.UID[0])}
		switch {
		case n.Pod != nil:
			iface.IP, iface.IPs, iface.InterfaceName = pod.Status.PodIP, []string{pod.Status.PodIP}, "eth0"
			pod0 = append(pod0, iface)
		case n.Multus != nil:
			ip := s.ips.networkIP(qualified(vmi.Namespace, n.Multus.NetworkName))
			iface.IP, iface.IPs, iface.InterfaceName = ip, []string{ip}, fmt.Sprintf("eth%d", i)
			rest = append(rest, iface)
		}
	}
	return append(pod0, rest...)
}

func qualified(ns, name string) string {
	for i := range name {
		if name[i] == '/' {
			return name
		}
	}
	return ns + "/" + name
}

// missingClaims names the first PVC a volume needs that does not exist.
func (s *Simulator) missingClaims(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	for _, claim := range claimNames(vmi) {
		err := s.client.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: claim}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return claim, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", nil
}

func claimNames(vmi *kubevirtv1.VirtualMachineInstance) []string {
	var names []string
	for _, v := range vmi.Spec.Volumes {
		switch {
		case v.DataVolume != nil:
			names = append(names, v.DataVolume.Name)
		case v.PersistentVolumeClaim != nil:
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

func hasVMICondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType, reason string) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t && c.Reason == reason {
			return true
		}
	}
	return false
}

func removeVMICondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) {
	kept := vmi.Status.Conditions[:0]
	for _, c := range vmi.Status.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	vmi.Status.Conditions = kept
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podConditionTime(pod *corev1.Pod, t corev1.PodConditionType) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.LastTransitionTime.Time
		}
	}
	return time.Now()
}

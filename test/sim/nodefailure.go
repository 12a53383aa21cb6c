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
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// GuestStopper is told when a guest stops without shutting down (its infra
// node died, or it crashed), so that its tenant Node stops reporting
// Ready, as a kubelet that stopped posting status would. A Joiner may
// implement it.
type GuestStopper interface {
	GuestStopped(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error
}

// unreachableTaints are what the node lifecycle controller puts on a node
// whose kubelet stopped posting status.
var unreachableTaints = []corev1.Taint{
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
}

// FailNode plays an infra node that dies: its kubelet and virt-handler stop
// acting (the simulator leaves its pods and VMIs as they are), its guests
// stop, and the node turns Ready Unknown with the unreachable taints, as the
// node lifecycle controller (which the world does not run) would set them
// (docs/simulator.md#node-failure).
func (s *Simulator) FailNode(ctx context.Context, name string) error {
	s.failedNodes.Store(name, true)
	if err := s.setNodeReachable(ctx, name, false); err != nil {
		return err
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.client.List(ctx, vmis); err != nil {
		return err
	}
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if vmi.Status.NodeName != name || finished(vmi) {
			continue
		}
		if err := s.guestStopped(ctx, vmi); err != nil {
			return err
		}
	}
	return nil
}

// RecoverNode brings a failed node back: Ready again, taints gone, and the
// simulator acting for it again. The guests it had died with it, so the
// restarted virt-handler finds no domain for the VMIs still on the node and
// fails them; the restarted kubelet looks at each of its pods again, and
// ends those deleted while it was away (docs/simulator.md#node-failure).
func (s *Simulator) RecoverNode(ctx context.Context, name string) error {
	s.failedNodes.Delete(name)
	if err := s.setNodeReachable(ctx, name, true); err != nil {
		return err
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.client.List(ctx, vmis); err != nil {
		return err
	}
	for i := range vmis.Items {
		if vmi := &vmis.Items[i]; vmi.Status.NodeName == name && !finished(vmi) {
			if err := s.finishLostGuest(ctx, client.ObjectKeyFromObject(vmi)); err != nil {
				return err
			}
		}
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
		return err
	}
	for i := range pods.Items {
		if pod := &pods.Items[i]; pod.Spec.NodeName == name {
			select {
			case s.kubeletResync <- event.GenericEvent{Object: pod}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// finishLostGuest fails a VMI whose domain is gone, being deleted or not.
func (s *Simulator) finishLostGuest(ctx context.Context, key types.NamespacedName) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.client.Get(ctx, key, vmi); err != nil {
			return client.IgnoreNotFound(err)
		}
		if finished(vmi) {
			return nil
		}
		s.setPhase(vmi, kubevirtv1.Failed)
		return client.IgnoreNotFound(s.handler.Update(ctx, vmi))
	})
}

// nodeFailed says whether the simulator plays a node as dead.
func (s *Simulator) nodeFailed(name string) bool {
	_, failed := s.failedNodes.Load(name)
	return failed
}

func (s *Simulator) setNodeReachable(ctx context.Context, name string, reachable bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return err
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable })
		status, reason := corev1.ConditionTrue, "KubeletReady"
		if !reachable {
			now := metav1.Now()
			for _, t := range unreachableTaints {
				t.TimeAdded = &now
				node.Spec.Taints = append(node.Spec.Taints, t)
			}
			status, reason = corev1.ConditionUnknown, "NodeStatusUnknown"
		}
		if err := s.client.Update(ctx, node); err != nil {
			return err
		}
		for i := range node.Status.Conditions {
			if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady && c.Status != status {
				c.Status, c.Reason, c.LastTransitionTime = status, reason, metav1.Now()
				c.Message = "Kubelet stopped posting node status."
				if reachable {
					c.Message = "kubelet is posting ready status"
				}
			}
		}
		return s.client.Status().Update(ctx, node)
	})
}

// CrashInstance plays a guest that crashes (QEMU dies): virt-handler
// reports the VMI Failed. The launcher pod is left to the real
// virt-controller, which deletes it with the finished VMI and, under
// runStrategy Always, starts a new instance.
func (s *Simulator) CrashInstance(ctx context.Context, namespace, name string) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.client.Get(ctx, key, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("VMI %s is %s, not Running", key, vmi.Status.Phase)
		}
		if err := s.guestStopped(ctx, vmi); err != nil {
			return err
		}
		s.setPhase(vmi, kubevirtv1.Failed)
		setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
			Status: corev1.ConditionFalse, Reason: "GuestCrashed", Message: "the guest crashed (simulated)"})
		return s.handler.Update(ctx, vmi)
	})
}

// guestStopped stops what the guest held outside the API server and tells
// the GuestStopper.
func (s *Simulator) guestStopped(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	s.stopSSH(client.ObjectKeyFromObject(vmi))
	s.probes.Store(vmi.UID, false)
	if stopper, ok := s.Joiner.(GuestStopper); ok {
		return stopper.GuestStopped(ctx, vmi)
	}
	return nil
}

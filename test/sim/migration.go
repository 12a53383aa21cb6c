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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// migrationDuration is how long a guest's memory takes to copy, before
// scaling.
const migrationDuration = 10 * time.Second

// liveMigratable judges, as virt-handler does on every sync, whether the
// VMI can live-migrate: its pod network interface must be masquerade (or
// bridge with the opt-in annotation), and every claim it mounts must be
// ReadWriteMany (docs/kubevirt-behaviour.md#live-migration).
func liveMigratable(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineInstanceCondition {
	c := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
	if !podNetworkMigratable(vmi) {
		c.Status, c.Reason = corev1.ConditionFalse, kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable
		c.Message = "cannot migrate VMI which does not use masquerade, bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin to connect to the pod network"
		return c
	}
	for _, v := range vmi.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		default:
			continue
		}
		shared, known := claimShared(vmi, v.Name)
		if !shared {
			c.Status, c.Reason = corev1.ConditionFalse, kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable
			c.Message = fmt.Sprintf("cannot migrate VMI: PVC %s is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)
			if !known {
				c.Message = fmt.Sprintf("cannot migrate VMI: Unable to determine if PVC %s is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)
			}
			return c
		}
	}
	return c
}

// podNetworkMigratable says whether the interface on the pod network, if
// any, can move: masquerade can, bridge only with the opt-in annotation.
func podNetworkMigratable(vmi *kubevirtv1.VirtualMachineInstance) bool {
	pod := ""
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	if len(vmi.Spec.Networks) == 0 && len(vmi.Spec.Domain.Devices.Interfaces) == 0 {
		// KubeVirt adds the pod network with its default binding, bridge.
		pod = "default"
	}
	if pod == "" {
		return true
	}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		if i.Name == pod && i.Masquerade != nil {
			return true
		}
	}
	_, allowed := vmi.Annotations[kubevirtv1.AllowPodBridgeNetworkLiveMigrationAnnotation]
	return allowed
}

// claimShared reads virt-controller's record of a volume's claim: whether
// it is ReadWriteMany, and whether it is known at all.
func claimShared(vmi *kubevirtv1.VirtualMachineInstance, volume string) (shared, known bool) {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name == volume && vs.PersistentVolumeClaimInfo != nil {
			return slices.Contains(vs.PersistentVolumeClaimInfo.AccessModes, corev1.ReadWriteMany), true
		}
	}
	return false, false
}

// completionTimeoutPerGiB is how long virt-launcher lets a migration copy
// each unit of its data before it aborts it (KubeVirt's default
// migrations.completionTimeoutPerGiB).
const completionTimeoutPerGiB = 150 * time.Second

// completionTimeout is virt-launcher's limit for migrating vmi: the
// per-unit time for each started gigabyte (10^9 bytes, as virt-launcher
// counts them) of its memory, the guest size when set, else the memory
// request. The volumes of a block migration would count too; the
// simulator plays none.
func completionTimeout(vmi *kubevirtv1.VirtualMachineInstance) time.Duration {
	memory := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		memory = *m.Guest
	}
	return time.Duration(memory.ScaledValue(resource.Giga)) * completionTimeoutPerGiB
}

// BusyGuest makes the guest of VMI namespace/name dirty its memory faster
// than a live migration copies it, as a write-heavy workload does: every
// migration of it runs until virt-launcher's completion timeout
// (completionTimeout, scaled) and then fails, aborted, with the VMI left
// on its node
// (docs/kubevirt-behaviour.md#live-migration).
func (s *Simulator) BusyGuest(namespace, name string) {
	s.busyGuests.Store(types.NamespacedName{Namespace: namespace, Name: name}, true)
}

func (s *Simulator) isBusy(vmi *kubevirtv1.VirtualMachineInstance) bool {
	_, busy := s.busyGuests.Load(types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name})
	return busy
}

// migrating says whether the real virt-controller handed a migration of
// this VMI to the nodes and it has not finished on them yet.
func migrating(vmi *kubevirtv1.VirtualMachineInstance) bool {
	m := vmi.Status.MigrationState
	if m == nil || m.TargetNode == "" || m.Failed {
		return false
	}
	_, labelled := vmi.Labels[kubevirtv1.MigrationTargetNodeNameLabel]
	return !m.Completed || labelled
}

// migrate plays, one step per call, the two virt-handlers of a migration
// the real virt-controller drives (docs/simulator.md#live-migration): the
// target advertises its address, the source starts sending, the target
// detects the domain, takes the VMI over (node name, labels, the pod
// network address of the target pod) and reports it completed; the source
// launcher then exits. Every step is one write, in the order virt-controller
// expects to see them.
func (s *Simulator) migrate(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (reconcile.Result, error) {
	m := vmi.Status.MigrationState
	now := metav1.Now()
	switch {
	case m.Completed:
		// The target's final cleanup.
		delete(vmi.Labels, kubevirtv1.MigrationTargetNodeNameLabel)
		delete(vmi.Annotations, kubevirtv1.CreateMigrationTarget)
	case m.TargetNodeAddress == "":
		pod, err := s.podOf(ctx, vmi.Namespace, m.TargetPod)
		if err != nil || pod == nil || pod.Status.Phase != corev1.PodRunning {
			// The target pod's own events bring the VMI back.
			return reconcile.Result{}, err
		}
		node := &corev1.Node{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: m.TargetNode}, node); err != nil {
			return reconcile.Result{}, err
		}
		m.TargetNodeAddress = InternalIP(node)
		m.TargetDirectMigrationNodePorts = map[string]int{"40001": 0}
	case m.StartTimestamp == nil:
		m.StartTimestamp, m.Mode, m.Failed = &now, kubevirtv1.MigrationPreCopy, false
	case !m.TargetNodeDomainDetected && s.isBusy(vmi):
		// The copy never converges; the source gives up after its
		// completion timeout, and the VMI stays where it was.
		timeout := completionTimeout(vmi)
		if wait := s.scaled(timeout) - time.Since(m.StartTimestamp.Time); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		m.Failed, m.EndTimestamp, m.AbortStatus = true, &now, kubevirtv1.MigrationAbortSucceeded
		m.FailureReason = fmt.Sprintf("Live migration is not completed after %d seconds and has been aborted", int64(timeout/time.Second))
	case !m.TargetNodeDomainDetected:
		if wait := s.scaled(migrationDuration) - time.Since(m.StartTimestamp.Time); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		m.TargetNodeDomainDetected, m.TargetNodeDomainReadyTimestamp = true, &now
		vmi.Status.Conditions = slices.DeleteFunc(vmi.Status.Conditions, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
			return c.Type == kubevirtv1.VirtualMachineInstanceMigrationRequired
		})
	case m.EndTimestamp == nil:
		pod, err := s.podOf(ctx, vmi.Namespace, m.TargetPod)
		if err != nil || pod == nil {
			return reconcile.Result{}, err
		}
		m.EndTimestamp = &now
		vmi.Status.NodeName = m.TargetNode
		vmi.Labels[kubevirtv1.NodeNameLabel] = m.TargetNode
		vmi.Status.EvacuationNodeName = ""
		delete(vmi.Annotations, kubevirtv1.EvictionSourceAnnotation)
		vmi.Status.MigrationTransport = kubevirtv1.MigrationTransportUnix
		finishHotplug(vmi)
		// With masquerade the guest is reached through its pod: the target
		// pod's IP.
		if vmi.Status.Interfaces, err = s.interfaces(ctx, vmi, pod); err != nil {
			return reconcile.Result{}, err
		}
	default:
		m.Completed = true
	}
	if err := s.handler.Update(ctx, vmi); apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	} else if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.Completed {
		return reconcile.Result{}, s.endSourceLauncher(ctx, vmi.Namespace, m.SourcePod)
	}
	return reconcile.Result{}, nil
}

// endSourceLauncher ends the source launcher of a completed migration: its
// domain shut off as migrated and the launcher exited.
func (s *Simulator) endSourceLauncher(ctx context.Context, namespace, name string) error {
	pod, err := s.podOf(ctx, namespace, name)
	if err != nil || pod == nil || pod.Status.Phase == corev1.PodSucceeded {
		return err
	}
	endPod(pod)
	return client.IgnoreNotFound(s.client.Status().Update(ctx, pod))
}

// endPod marks a pod's containers exited and the pod Succeeded.
func endPod(pod *corev1.Pod) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: now}}
	}
	setPodConditionStatus(pod, corev1.PodReady, false, now)
	setPodConditionStatus(pod, corev1.ContainersReady, false, now)
}

func (s *Simulator) podOf(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if name == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pod); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return pod, nil
}

// finishHotplug plays the target virt-handler finalizing a migration that
// carried a hot-plug (KubeVirt v1.7.0 pkg/virt-handler/migration-target.go,
// hotplugCPU and hotplugMemory): the guest now has the spec's CPU
// topology and memory, recorded in the VMI's status, and the hot-plug
// conditions go, which lets virt-controller call the migration a success.
func finishHotplug(vmi *kubevirtv1.VirtualMachineInstance) {
	if vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceVCPUChange) != nil {
		if cpu := vmi.Spec.Domain.CPU; cpu != nil {
			vmi.Status.CurrentCPUTopology = &kubevirtv1.CPUTopology{Sockets: cpu.Sockets, Cores: cpu.Cores, Threads: cpu.Threads}
		}
	}
	if vmiConditionTrue(vmi, kubevirtv1.VirtualMachineInstanceMemoryChange) {
		if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil && vmi.Status.Memory != nil {
			vmi.Status.Memory.GuestRequested = ptr.To(m.Guest.DeepCopy())
			// The guest onlines the new memory: libvirt's currentMemory
			// follows.
			vmi.Status.Memory.GuestCurrent = ptr.To(m.Guest.DeepCopy())
		}
	}
	vmi.Status.Conditions = slices.DeleteFunc(vmi.Status.Conditions, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
		return c.Type == kubevirtv1.VirtualMachineInstanceVCPUChange ||
			(c.Type == kubevirtv1.VirtualMachineInstanceMemoryChange && c.Status == corev1.ConditionTrue)
	})
}

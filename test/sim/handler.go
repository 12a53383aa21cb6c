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
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// handlerDelay is how long virt-handler takes from a started launcher pod
// to a running domain, before scaling.
const handlerDelay = 5 * time.Second

// conflictRetry is how soon a write that lost a race with virt-controller
// is tried again, on the VMI as it is then.
const conflictRetry = 100 * time.Millisecond

func (s *Simulator) setupHandler(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-virt-handler").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileVMI))
}

// reconcileVMI plays virt-handler, and the guest, for a VMI that the real
// virt-controller has handed to a node (phase Scheduled, status.nodeName
// set): the domain starts and the VMI runs; a deleted VMI's guest shuts
// down and the VMI succeeds (docs/simulator.md#virt-handler). Everything
// before the hand-over, and failing a VMI whose pod vanished, is
// virt-controller's.
func (s *Simulator) reconcileVMI(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, req.NamespacedName, vmi); err != nil {
		if client.IgnoreNotFound(err) == nil {
			s.stopSSH(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if finished(vmi) {
		// The guest is off: so is its sshd.
		s.stopSSH(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if vmi.Status.NodeName == "" || s.nodeFailed(vmi.Status.NodeName) {
		return reconcile.Result{}, nil
	}
	before := vmi.DeepCopy()
	switch {
	case !vmi.DeletionTimestamp.IsZero():
		// A graceful shutdown: the guest powers off, the VMI succeeds.
		s.stopSSH(req.NamespacedName)
		s.setPhase(vmi, kubevirtv1.Succeeded)
	case s.launcherStopping(ctx, vmi):
		// The launcher was told to stop (its pod deleted or evicted): it
		// shuts the guest down, and the VMI succeeds.
		s.stopSSH(req.NamespacedName)
		s.setPhase(vmi, kubevirtv1.Succeeded)
	case vmi.Status.Phase == kubevirtv1.Running && migrating(vmi):
		return s.migrate(ctx, vmi)
	case vmi.Status.Phase == kubevirtv1.Scheduled:
		pod, err := s.launcherPod(ctx, vmi)
		if err != nil || pod == nil || pod.Status.StartTime == nil {
			return reconcile.Result{}, err
		}
		if wait := s.scaled(handlerDelay) - time.Since(pod.Status.StartTime.Time); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		s.setPhase(vmi, kubevirtv1.Running)
		setVMICondition(vmi, liveMigratable(vmi))
		if vmi.Status.Interfaces, err = s.interfaces(ctx, vmi, pod); err != nil {
			return reconcile.Result{}, err
		}
		vmi.Status.Machine = &kubevirtv1.Machine{Type: machineType(vmi)}
		vmi.Status.SelinuxContext = "none"
	case vmi.Status.Phase == kubevirtv1.Running:
		if !syncHotplugVolumes(vmi) {
			return s.bootGuest(ctx, vmi)
		}
	}
	if equality.Semantic.DeepEqual(before.Status, vmi.Status) {
		return reconcile.Result{}, nil
	}
	// The VMI has no status subresource; virt-api keeps status changes only
	// from KubeVirt's service accounts, so virt-handler's writes go out as
	// kubevirt-handler.
	if err := s.handler.Update(ctx, vmi); apierrors.IsConflict(err) {
		// virt-controller wrote first; look again.
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	} else if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if vmi.Status.Phase == kubevirtv1.Running {
		return s.bootGuest(ctx, vmi)
	}
	return reconcile.Result{}, nil
}

// launcherStopping says whether the launcher pod on the VMI's node is being
// deleted while the VMI runs.
func (s *Simulator) launcherStopping(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi.Status.Phase != kubevirtv1.Running && vmi.Status.Phase != kubevirtv1.Scheduled {
		return false
	}
	pods, err := s.launcherPods(ctx, vmi)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return !p.DeletionTimestamp.IsZero() })
}

// setPhase moves the VMI to a phase and records when, as virt-handler does.
func (s *Simulator) setPhase(vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase) {
	if vmi.Status.Phase == phase {
		return
	}
	vmi.Status.Phase = phase
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
}

func machineType(vmi *kubevirtv1.VirtualMachineInstance) string {
	if m := vmi.Spec.Domain.Machine; m != nil && m.Type != "" {
		return m.Type
	}
	return "q35"
}

// interfaces reports one entry per interface as the guest agent sees it:
// the pod network carries the pod IP and comes first; Multus networks get
// an IP of their own (docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
func (s *Simulator) interfaces(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) ([]kubevirtv1.VirtualMachineInstanceNetworkInterface, error) {
	podInterface := map[string]string{}
	for _, i := range vmi.Status.Interfaces {
		podInterface[i.Name] = i.PodInterfaceName
	}
	specMAC := map[string]string{}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		specMAC[i.Name] = strings.ToLower(i.MacAddress)
	}
	cfg, err := s.guestNetwork(ctx, vmi)
	if err != nil {
		return nil, err
	}
	static := cfg.static
	var pod0, rest []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for i, n := range vmi.Spec.Networks {
		// KubeVirt gives the interface the MAC its spec asks for.
		mac := cmp.Or(specMAC[n.Name], fmt.Sprintf("02:00:00:%02x:%02x:%02x", i, len(vmi.Name)%256, vmi.UID[0]))
		iface := kubevirtv1.VirtualMachineInstanceNetworkInterface{
			Name: n.Name, MAC: mac,
			InfoSource: "domain, guest-agent", PodInterfaceName: podInterface[n.Name], QueueCount: 1,
		}
		switch {
		case n.Pod != nil:
			iface.IP, iface.IPs, iface.InterfaceName = pod.Status.PodIP, []string{pod.Status.PodIP}, "eth0"
			pod0 = append(pod0, iface)
		case n.Multus != nil && len(static[mac]) > 0:
			// The guest configured the address its network config gives.
			iface.IP, iface.IPs, iface.InterfaceName = static[mac][0], static[mac], fmt.Sprintf("eth%d", i)
			iface.InfoSource += ", multus-status"
			rest = append(rest, iface)
		case n.Multus != nil && cfg.dhcpOn(mac, i == 0):
			// KubeVirt's DHCP server hands the guest the address the
			// network's IPAM gave the pod, once the guest asks.
			ip := s.ips.networkIP(qualified(vmi.Namespace, n.Multus.NetworkName))
			iface.IP, iface.IPs, iface.InterfaceName = ip, []string{ip}, fmt.Sprintf("eth%d", i)
			iface.InfoSource += ", multus-status"
			rest = append(rest, iface)
		case n.Multus != nil:
			// The guest never asked: the interface is up without an address.
			iface.InterfaceName = fmt.Sprintf("eth%d", i)
			iface.InfoSource += ", multus-status"
			rest = append(rest, iface)
		}
	}
	return append(pod0, rest...), nil
}

func qualified(ns, name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return ns + "/" + name
}

func finished(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
}

func setVMICondition(vmi *kubevirtv1.VirtualMachineInstance, c kubevirtv1.VirtualMachineInstanceCondition) {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == c.Type {
			if vmi.Status.Conditions[i].Status != c.Status {
				c.LastTransitionTime = metav1.Now()
			} else {
				c.LastTransitionTime = vmi.Status.Conditions[i].LastTransitionTime
			}
			vmi.Status.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	vmi.Status.Conditions = append(vmi.Status.Conditions, c)
}

func vmiConditionTrue(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) bool {
	c := vmiCondition(vmi, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// vmiCondition is the VMI's condition of type t, or nil.
func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

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

// Package vmstatus reads the state of a VirtualMachine, its instance and its
// DataVolumes, as KubeVirt and CDI report it, and says in one reason and
// message what the machine waits for. It is pure: objects in, verdict out.
package vmstatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// State is the verdict on a VM.
type State struct {
	// Ready is true when the instance runs and KubeVirt reports it Ready.
	Ready bool
	// Running is true when the instance runs, ready or not.
	Running bool
	// Reason is a VirtualMachineReady condition reason.
	Reason string
	// Message carries KubeVirt's or CDI's own words.
	Message string
	// Warning is true when the state needs attention rather than patience.
	Warning bool
}

// Of judges a VM (not nil), its instance (nil when none) and the DataVolumes
// of its templates that exist.
func Of(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, dvs []*cdiv1.DataVolume) State {
	if s, waiting := disks(dvs); waiting {
		return s
	}
	if vmi == nil {
		return noInstance(vm)
	}
	if (vmi.Status.Phase == kubevirtv1.Failed || vmi.Status.Phase == kubevirtv1.Succeeded) && Restartable(vm) && vm.DeletionTimestamp.IsZero() {
		// KubeVirt replaces the instance (docs/kubevirt-behaviour.md#run-strategies-and-deletion):
		// the machine is restarting, not dead.
		return State{Reason: infrav1.RestartingReason, Message: fmt.Sprintf(
			"VM instance %s (%s); KubeVirt starts a new one (runStrategy Always)",
			strings.ToLower(string(vmi.Status.Phase)), conditionMessage(vmi, kubevirtv1.VirtualMachineInstanceReady))}
	}
	return instance(vmi)
}

// Finished says whether an instance ended, cleanly or not.
func Finished(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
}

// RunStrategy names the VM's run strategy for messages, including the
// deprecated running field.
func RunStrategy(vm *kubevirtv1.VirtualMachine) string {
	if vm.Spec.RunStrategy != nil {
		return string(*vm.Spec.RunStrategy)
	}
	if vm.Spec.Running != nil && *vm.Spec.Running {
		return "Always (running: true)"
	}
	return "Halted"
}

// Restartable says whether KubeVirt starts a new instance whenever the
// current one ends, however it ends: runStrategy Always (or running:
// true). RerunOnFailure and Manual leave a cleanly stopped VM stopped.
func Restartable(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.RunStrategy != nil {
		return *vm.Spec.RunStrategy == kubevirtv1.RunStrategyAlways
	}
	return vm.Spec.Running != nil && *vm.Spec.Running
}

func disks(dvs []*cdiv1.DataVolume) (State, bool) {
	for _, dv := range dvs {
		if st, waiting := Disk(dv); waiting {
			return st, true
		}
	}
	return State{}, false
}

// Disk judges one DataVolume; waiting is false once it no longer holds a VM
// back (Succeeded, or waiting for its first consumer).
func Disk(dv *cdiv1.DataVolume) (State, bool) {
	phase := dv.Status.Phase
	switch phase {
	case cdiv1.Succeeded, cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
		return State{}, false
	case cdiv1.Failed:
		return State{Reason: infrav1.DiskFailedReason, Warning: true,
			Message: fmt.Sprintf("DataVolume %s failed: %s", dv.Name, DataVolumeMessage(dv))}, true
	}
	if r, refused := DiskRefusal(dv); refused {
		return refusalState(r, "the claim of DataVolume "+dv.Name), true
	}
	reason := infrav1.DiskPendingReason
	p := string(phase)
	switch {
	case strings.HasPrefix(p, "Import"):
		reason = infrav1.DiskImportingReason
	case strings.Contains(p, "Clone") || strings.Contains(p, "Snapshot") || p == string(cdiv1.PrepClaimInProgress) || p == string(cdiv1.RebindInProgress):
		reason = infrav1.DiskCloningReason
	}
	msg := fmt.Sprintf("DataVolume %s is %s", dv.Name, orUnknown(p))
	if prog := string(dv.Status.Progress); prog != "" && prog != "N/A" {
		msg += " (" + prog + ")"
	}
	if m := DataVolumeMessage(dv); m != "" {
		msg += ": " + m
	}
	if dv.Status.RestartCount > 0 {
		msg += fmt.Sprintf(" (restarted %d times)", dv.Status.RestartCount)
	}
	return State{Reason: reason, Message: msg, Warning: dv.Status.RestartCount > 0}, true
}

// DataVolumeMessage is the most telling condition message CDI set.
func DataVolumeMessage(dv *cdiv1.DataVolume) string {
	for _, t := range []cdiv1.DataVolumeConditionType{cdiv1.DataVolumeRunning, cdiv1.DataVolumeReady, cdiv1.DataVolumeBound} {
		for _, c := range dv.Status.Conditions {
			if c.Type == t && c.Status != corev1.ConditionTrue && c.Message != "" {
				return c.Message
			}
		}
	}
	return ""
}

func noInstance(vm *kubevirtv1.VirtualMachine) State {
	if vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusCrashLoopBackOff {
		msg := "the VM's instances keep failing; KubeVirt backs off before starting it again"
		if f := vm.Status.StartFailure; f != nil {
			msg = fmt.Sprintf("the VM's instance failed %d times in a row; KubeVirt starts it again", f.ConsecutiveFailCount)
			if f.RetryAfterTimestamp != nil {
				msg += " after " + f.RetryAfterTimestamp.UTC().Format("15:04:05Z")
			}
		}
		return State{Reason: infrav1.CrashLoopBackOffReason, Warning: true, Message: msg}
	}
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineFailure && c.Status == corev1.ConditionTrue {
			return State{Reason: infrav1.StartFailedReason, Warning: true, Message: "KubeVirt cannot start the VM: " + c.Message}
		}
	}
	msg := "waiting for KubeVirt to start the VM"
	if s := vm.Status.PrintableStatus; s != "" {
		msg += "; VM status " + string(s)
	}
	return State{Reason: infrav1.PendingReason, Message: msg}
}

func instance(vmi *kubevirtv1.VirtualMachineInstance) State {
	switch vmi.Status.Phase {
	case kubevirtv1.Failed, kubevirtv1.Succeeded:
		return State{Reason: infrav1.StoppedReason, Warning: true,
			Message: fmt.Sprintf("VM instance %s: %s", strings.ToLower(string(vmi.Status.Phase)), conditionMessage(vmi, kubevirtv1.VirtualMachineInstanceReady))}
	case kubevirtv1.Running:
		if c := Condition(vmi, kubevirtv1.VirtualMachineInstanceReady); c != nil && c.Status == corev1.ConditionTrue {
			return State{Ready: true, Running: true, Reason: infrav1.ReadyReason, Message: "VM instance is running and ready on " + vmi.Status.NodeName}
		}
		return State{Running: true, Reason: infrav1.BootingReason,
			Message: "VM instance is running on " + vmi.Status.NodeName + ", not ready yet: " + conditionMessage(vmi, kubevirtv1.VirtualMachineInstanceReady)}
	case kubevirtv1.Scheduled:
		return State{Reason: infrav1.BootingReason, Message: "VM instance is scheduled on " + vmi.Status.NodeName + ", starting"}
	case kubevirtv1.Scheduling:
		if c := Condition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled)); c != nil && c.Status == corev1.ConditionFalse {
			if msg := DevicesMessage(vmi, nil); msg != "" {
				return State{Reason: infrav1.InsufficientDevicesReason, Warning: true, Message: msg}
			}
			return State{Reason: infrav1.UnschedulableReason, Warning: true, Message: "no infra node can take the VM: " + c.Message}
		}
		return State{Reason: infrav1.PendingReason, Message: "VM instance is being scheduled"}
	}
	if r, refused := LauncherRefusal(vmi); refused {
		return refusalState(r, "the VM's launcher pod")
	}
	msg := "VM instance is pending"
	if m := conditionMessage(vmi, "Synchronized"); m != "" {
		msg += ": " + m
	}
	return State{Reason: infrav1.PendingReason, Message: msg}
}

// Condition is the VM instance's condition of type t, or nil.
func Condition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// VMCondition is the VM's condition of type t, or nil.
func VMCondition(vm *kubevirtv1.VirtualMachine, t kubevirtv1.VirtualMachineConditionType) *kubevirtv1.VirtualMachineCondition {
	for i := range vm.Status.Conditions {
		if vm.Status.Conditions[i].Type == t {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

func conditionMessage(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) string {
	c := Condition(vmi, t)
	if c == nil {
		return ""
	}
	if c.Message != "" {
		return c.Message
	}
	return c.Reason
}

func orUnknown(s string) string {
	if s == "" {
		return "pending"
	}
	return s
}

// NodeNetwork is the network whose addresses the node uses: the configured
// one, else the pod network, else the first network.
func NodeNetwork(vmi *kubevirtv1.VirtualMachineInstance, configured string) string {
	if configured != "" {
		return configured
	}
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			return n.Name
		}
	}
	if len(vmi.Spec.Networks) > 0 {
		return vmi.Spec.Networks[0].Name
	}
	// KubeVirt adds the pod network "default" when none is listed.
	return "default"
}

// NetworkNames lists the instance's network names; "default" when it has
// none, for the pod network KubeVirt adds then.
func NetworkNames(vmi *kubevirtv1.VirtualMachineInstance) []string {
	var names []string
	for _, n := range vmi.Spec.Networks {
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		names = []string{"default"}
	}
	return names
}

// Address is one machine address; the type is a CAPI MachineAddressType.
type Address struct {
	Type    string
	Address string
}

// Addresses lists the instance's addresses: every IP of the node network
// first (both families), then the IPs of the other interfaces, then the
// hostname as Hostname and InternalDNS. Interfaces are matched by network
// name, never by position: the node IP is not always interfaces[0] (
// docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
func Addresses(vmi *kubevirtv1.VirtualMachineInstance, nodeNetwork string) []Address {
	ifaces := slices.Clone(vmi.Status.Interfaces)
	slices.SortStableFunc(ifaces, func(a, b kubevirtv1.VirtualMachineInstanceNetworkInterface) int {
		switch {
		case a.Name == nodeNetwork && b.Name != nodeNetwork:
			return -1
		case b.Name == nodeNetwork && a.Name != nodeNetwork:
			return 1
		}
		return 0
	})
	var out []Address
	seen := map[string]bool{}
	for _, iface := range ifaces {
		ips := iface.IPs
		if len(ips) == 0 && iface.IP != "" {
			ips = []string{iface.IP}
		}
		for _, ip := range ips {
			if ip != "" && !seen[ip] {
				seen[ip] = true
				out = append(out, Address{Type: "InternalIP", Address: ip})
			}
		}
	}
	host := vmi.Spec.Hostname
	if host == "" {
		host = vmi.Name
	}
	return append(out, Address{Type: "Hostname", Address: host}, Address{Type: "InternalDNS", Address: host})
}

// HasNodeAddress reports whether the node network has an IP yet; KubeVirt
// can briefly report an interface without one (docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
func HasNodeAddress(vmi *kubevirtv1.VirtualMachineInstance, nodeNetwork string) bool {
	for _, iface := range vmi.Status.Interfaces {
		if iface.Name == nodeNetwork && (iface.IP != "" || len(iface.IPs) > 0) {
			return true
		}
	}
	return false
}

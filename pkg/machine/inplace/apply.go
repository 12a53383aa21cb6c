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

package inplace

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// Want is what a KubevirtMachine's spec asks of its running VM among the
// things that change in place. A zero field is one the spec leaves to
// others (a preset, an instance type), which an update does not touch.
type Want struct {
	Sockets     uint32
	Guest       *resource.Quantity
	Labels      map[string]string
	Annotations map[string]string
	// Disks are the disks' sizes, by the name of the VM's volume.
	Disks map[string]resource.Quantity
}

// WantOf reads what spec asks of the running VM.
func WantOf(spec *infrav1.KubevirtMachineSpec) Want {
	t := &spec.VirtualMachineTemplate
	w := Want{Labels: t.ObjectMeta.Labels, Annotations: t.ObjectMeta.Annotations, Disks: diskSizes(spec)}
	d := domainOf(t)
	if d == nil || spec.Preset != nil {
		// A preset sets CPU and memory from its size; Decide declines
		// changing them in place.
		return w
	}
	if d.CPU != nil {
		w.Sockets = d.CPU.Sockets
	}
	if d.Memory != nil && d.Memory.Guest != nil {
		w.Guest = ptrCopy(d.Memory.Guest)
	}
	return w
}

// VMPatch is the JSON merge patch that gives vm what w asks, or nil when
// it has it. reserved names the label and annotation keys the provider
// sets on every VM itself, which the template's do not override.
func VMPatch(vm *kubevirtv1.VirtualMachine, w Want, reserved func(key string) bool) ([]byte, error) {
	patch := map[string]any{}
	meta := map[string]any{}
	if m := missing(vm.Labels, w.Labels, reserved); len(m) > 0 {
		meta["labels"] = m
	}
	if m := missing(vm.Annotations, w.Annotations, reserved); len(m) > 0 {
		meta["annotations"] = m
	}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	domain := map[string]any{}
	if cpu := vmDomain(vm).CPU; w.Sockets != 0 && (cpu == nil || cpu.Sockets != w.Sockets) {
		domain["cpu"] = map[string]any{"sockets": w.Sockets}
	}
	if mem := vmDomain(vm).Memory; w.Guest != nil && (mem == nil || mem.Guest == nil || mem.Guest.Cmp(*w.Guest) != 0) {
		domain["memory"] = map[string]any{"guest": w.Guest.String()}
	}
	if len(domain) > 0 {
		patch["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"domain": domain}}}
	}
	if len(patch) == 0 {
		return nil, nil
	}
	return json.Marshal(patch)
}

// missing is what of want has is missing or has otherwise.
func missing(has, want map[string]string, reserved func(string) bool) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if cur, ok := has[k]; (!ok || cur != v) && !reserved(k) {
			out[k] = v
		}
	}
	return out
}

func vmDomain(vm *kubevirtv1.VirtualMachine) *kubevirtv1.DomainSpec {
	if vm.Spec.Template == nil {
		return &kubevirtv1.DomainSpec{}
	}
	return &vm.Spec.Template.Spec.Domain
}

// KubeVirt's reasons for a failed hot-plug request that it retries
// (pkg/virt-controller/watch/vm of v1.7.0): another one is in progress,
// or the instance is migrating.
const (
	hotplugCPUError    = "HotPlugCPUError"
	hotplugMemoryError = "HotPlugMemoryError"
)

// Progress reads how far KubeVirt has applied w to the running VM: done
// once the instance runs with the spec's sockets and memory and its
// disks' claims have the storage the spec's sizes need; failed when
// KubeVirt asks for a restart or cannot carry a hot-plug by migrating;
// else waiting, with what for. The VM's metadata is applied by the patch
// itself.
func Progress(w Want, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) outcome.Outcome {
	if c := vmstatus.VMCondition(vm, kubevirtv1.VirtualMachineRestartRequired); c != nil && c.Status == corev1.ConditionTrue {
		return outcome.Fail(infrav1.InPlaceUpdateFailedReason,
			"KubeVirt cannot apply the change to the running VM and asks for a restart: "+c.Message+"; replace the machine (delete its Machine)")
	}
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		return outcome.Wait(infrav1.InPlaceUpdatingReason, "waiting for the VM instance to run")
	}
	var pending []string
	if w.Sockets != 0 && (vmi.Status.CurrentCPUTopology == nil || vmi.Status.CurrentCPUTopology.Sockets != w.Sockets) {
		pending = append(pending, fmt.Sprintf("%d CPU sockets", w.Sockets))
	}
	if w.Guest != nil && (vmi.Status.Memory == nil || vmi.Status.Memory.GuestRequested == nil || vmi.Status.Memory.GuestRequested.Cmp(*w.Guest) != 0) {
		pending = append(pending, w.Guest.String()+" of guest memory")
	}
	_, disks := ClaimsToGrow(w, vm, vmi)
	if len(pending) == 0 {
		if len(disks) > 0 {
			return outcome.Wait(infrav1.InPlaceUpdatingReason, "waiting for the infra cluster to grow "+strings.Join(disks, " and "))
		}
		return outcome.Ready(infrav1.InPlaceUpdatedReason, "the running VM has what the spec asks")
	}
	what := strings.Join(pending, " and ")
	if c := vmstatus.Condition(vmi, kubevirtv1.VirtualMachineInstanceIsMigratable); c != nil && c.Status == corev1.ConditionFalse {
		return outcome.Fail(infrav1.InPlaceUpdateFailedReason, fmt.Sprintf(
			"KubeVirt hot-plugs %s only by a live migration, and the VM cannot migrate: %s; replace the machine (delete its Machine)", what, c.Message))
	}
	if c := vmstatus.VMCondition(vm, kubevirtv1.VirtualMachineFailure); c != nil && c.Status == corev1.ConditionTrue &&
		(c.Reason == hotplugCPUError || c.Reason == hotplugMemoryError) {
		return outcome.Wait(infrav1.InPlaceUpdatingReason, fmt.Sprintf("waiting for KubeVirt to hot-plug %s, which it retries: %s", what, c.Message))
	}
	if m := vmi.Status.MigrationState; m != nil && m.Failed && hotplugPending(vmi) {
		return outcome.Wait(infrav1.InPlaceUpdatingReason, fmt.Sprintf(
			"the live migration carrying %s failed (%s); KubeVirt tries again", what, m.FailureReason))
	}
	if m := vmi.Status.MigrationState; m != nil && !m.Completed && !m.Failed {
		return outcome.Wait(infrav1.InPlaceUpdatingReason, fmt.Sprintf(
			"KubeVirt hot-plugs %s by a live migration to node %s", what, m.TargetNode))
	}
	return outcome.Wait(infrav1.InPlaceUpdatingReason, fmt.Sprintf("waiting for KubeVirt to hot-plug %s", what))
}

// hotplugPending says whether KubeVirt marked the instance for a hot-plug
// it has not finished.
func hotplugPending(vmi *kubevirtv1.VirtualMachineInstance) bool {
	c, m := vmstatus.Condition(vmi, kubevirtv1.VirtualMachineInstanceVCPUChange), vmstatus.Condition(vmi, kubevirtv1.VirtualMachineInstanceMemoryChange)
	return (c != nil && c.Status == corev1.ConditionTrue) || (m != nil && m.Status == corev1.ConditionTrue)
}

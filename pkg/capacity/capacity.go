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

// Package capacity computes what one machine of a KubevirtMachineTemplate
// offers (vCPUs, memory, architecture), so that the cluster autoscaler can
// scale a MachineDeployment up from zero.
package capacity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Result is the capacity of one machine, or why it is unknown.
type Result struct {
	// Capacity holds cpu and memory when known.
	Capacity corev1.ResourceList
	// NodeInfo holds the architecture and operating system.
	NodeInfo infrav1.NodeInfo
	// Reason is FromTemplate, FromInstancetype or CapacityUnknown.
	Reason string
	// Message explains the reason.
	Message string
}

// Known reports whether the capacity could be computed.
func (r Result) Known() bool { return r.Reason != infrav1.CapacityUnknownReason }

// FromVirtualMachine computes the capacity of a VM built from spec. When the
// spec selects an instance type, it must be passed as instancetype (nil when
// it could not be found; the message then says so).
func FromVirtualMachine(spec *kubevirtv1.VirtualMachineSpec, instancetype *instancetypev1beta1.VirtualMachineInstancetypeSpec) Result {
	res := Result{NodeInfo: nodeInfo(spec)}
	if spec.Template == nil {
		res.Reason, res.Message = infrav1.CapacityUnknownReason, "the VM template has no spec.template"
		return res
	}
	if spec.Instancetype != nil {
		if instancetype == nil {
			res.Reason = infrav1.CapacityUnknownReason
			res.Message = fmt.Sprintf("instance type %q was not found on the infra cluster", spec.Instancetype.Name)
			return res
		}
		res.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(instancetype.CPU.Guest), resource.DecimalSI),
			corev1.ResourceMemory: instancetype.Memory.Guest.DeepCopy(),
		}
		res.Reason = infrav1.FromInstancetypeReason
		res.Message = fmt.Sprintf("from instance type %q", spec.Instancetype.Name)
		return res
	}

	domain := &spec.Template.Spec.Domain
	memory, ok := guestMemory(domain)
	if !ok {
		res.Reason, res.Message = infrav1.CapacityUnknownReason, "the VM template sets no guest memory, memory request or limit"
		return res
	}
	res.Capacity = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(vcpus(domain), resource.DecimalSI),
		corev1.ResourceMemory: memory,
	}
	res.Reason, res.Message = infrav1.FromTemplateReason, "from the VM template"
	return res
}

// vcpus follows KubeVirt: an explicit topology wins, else the CPU limit or
// request rounded up, else one vCPU.
func vcpus(domain *kubevirtv1.DomainSpec) int64 {
	if cpu := domain.CPU; cpu != nil && (cpu.Sockets > 0 || cpu.Cores > 0 || cpu.Threads > 0) {
		return int64(atLeastOne(cpu.Sockets)) * int64(atLeastOne(cpu.Cores)) * int64(atLeastOne(cpu.Threads))
	}
	for _, list := range []corev1.ResourceList{domain.Resources.Limits, domain.Resources.Requests} {
		if q, ok := list[corev1.ResourceCPU]; ok {
			// Round milli-CPUs up to whole vCPUs.
			return (q.MilliValue() + 999) / 1000
		}
	}
	return 1
}

// guestMemory follows KubeVirt: guest memory wins, else the memory request,
// else the limit.
func guestMemory(domain *kubevirtv1.DomainSpec) (resource.Quantity, bool) {
	if domain.Memory != nil && domain.Memory.Guest != nil {
		return domain.Memory.Guest.DeepCopy(), true
	}
	for _, list := range []corev1.ResourceList{domain.Resources.Requests, domain.Resources.Limits} {
		if q, ok := list[corev1.ResourceMemory]; ok {
			return q.DeepCopy(), true
		}
	}
	return resource.Quantity{}, false
}

func nodeInfo(spec *kubevirtv1.VirtualMachineSpec) infrav1.NodeInfo {
	arch := infrav1.ArchitectureAmd64
	if spec.Template != nil && spec.Template.Spec.Architecture != "" {
		arch = infrav1.Architecture(spec.Template.Spec.Architecture)
	}
	return infrav1.NodeInfo{Architecture: arch, OperatingSystem: "linux"}
}

func atLeastOne(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

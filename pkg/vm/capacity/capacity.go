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
// offers (vCPUs, memory, GPUs and host devices, architecture), so that the cluster autoscaler can
// scale a MachineDeployment up from zero.
package capacity

import (
	"fmt"
	"slices"
	"strings"

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
func (r Result) Known() bool {
	return r.Reason == infrav1.FromTemplateReason || r.Reason == infrav1.FromInstancetypeReason
}

// Sources are the instance type and preference a VM selects, as read from
// the infra cluster; nil when the VM selects none or it was not found.
type Sources struct {
	Instancetype *instancetypev1beta1.VirtualMachineInstancetypeSpec
	Preference   *instancetypev1beta1.VirtualMachinePreferenceSpec
}

// FromVirtualMachine computes the capacity of a VM built from spec: vCPUs,
// memory, and GPUs and host devices by resource name. A preference counts
// where it changes what the machine is: its preferred architecture, and its
// requirements, which KubeVirt refuses a VM for when the instance type falls
// short.
func FromVirtualMachine(spec *kubevirtv1.VirtualMachineSpec, src Sources) Result {
	res := Result{NodeInfo: nodeInfo(spec, src.Preference)}
	if spec.Template == nil {
		res.Reason, res.Message = infrav1.CapacityUnknownReason, "the VM template has no spec.template"
		return res
	}
	if spec.Preference != nil && src.Preference == nil {
		res.Reason = infrav1.CapacityUnknownReason
		res.Message = fmt.Sprintf("preference %q was not found on the infra cluster", spec.Preference.Name)
		return res
	}
	domain := &spec.Template.Spec.Domain
	if spec.Instancetype != nil {
		it := src.Instancetype
		if it == nil {
			res.Reason = infrav1.CapacityUnknownReason
			res.Message = fmt.Sprintf("instance type %q was not found on the infra cluster", spec.Instancetype.Name)
			return res
		}
		if msg := unmetRequirements(it.CPU.Guest, it.Memory.Guest, src.Preference); msg != "" {
			res.Reason = infrav1.CapacityUnknownReason
			res.Message = fmt.Sprintf("instance type %q does not meet preference %q: %s", spec.Instancetype.Name, spec.Preference.Name, msg)
			return res
		}
		res.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(it.CPU.Guest), resource.DecimalSI),
			corev1.ResourceMemory: it.Memory.Guest.DeepCopy(),
		}
		addDevices(res.Capacity, append(slices.Clone(it.GPUs), domain.Devices.GPUs...),
			append(slices.Clone(it.HostDevices), domain.Devices.HostDevices...))
		res.Reason = infrav1.FromInstancetypeReason
		res.Message = fmt.Sprintf("from instance type %q", spec.Instancetype.Name)
		return res
	}

	memory, ok := GuestMemory(domain)
	if !ok {
		res.Reason, res.Message = infrav1.CapacityUnknownReason, "the VM template sets no guest memory, memory request or limit"
		return res
	}
	if msg := unmetRequirements(uint32(VCPUs(domain)), memory, src.Preference); msg != "" {
		res.Reason = infrav1.CapacityUnknownReason
		res.Message = fmt.Sprintf("the VM template does not meet preference %q: %s", spec.Preference.Name, msg)
		return res
	}
	res.Capacity = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(VCPUs(domain), resource.DecimalSI),
		corev1.ResourceMemory: memory,
	}
	addDevices(res.Capacity, domain.Devices.GPUs, domain.Devices.HostDevices)
	res.Reason, res.Message = infrav1.FromTemplateReason, "from the VM template"
	return res
}

// GPUResource is the tenant Node resource a passed-through GPU shows up as:
// the vendor's GPU resource (nvidia.com/gpu for nvidia.com/TU104GL_Tesla_T4),
// which the vendor's device plugin in the guest advertises and the cluster
// autoscaler reads for scale from zero.
func GPUResource(deviceName string) corev1.ResourceName {
	vendor, _, found := strings.Cut(deviceName, "/")
	if !found {
		return corev1.ResourceName(deviceName)
	}
	return corev1.ResourceName(vendor + "/gpu")
}

// addDevices counts GPUs under their vendor's GPU resource and host devices
// under their KubeVirt device name.
func addDevices(capacity corev1.ResourceList, gpus []kubevirtv1.GPU, hostDevices []kubevirtv1.HostDevice) {
	count := map[corev1.ResourceName]int64{}
	for _, g := range gpus {
		count[GPUResource(g.DeviceName)]++
	}
	for _, d := range hostDevices {
		count[corev1.ResourceName(d.DeviceName)]++
	}
	for name, n := range count {
		capacity[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
}

// unmetRequirements says what of a preference's requirements a VM of vcpus
// and memory (from its instance type or its template) lacks, empty when it
// meets them.
func unmetRequirements(vcpus uint32, memory resource.Quantity, p *instancetypev1beta1.VirtualMachinePreferenceSpec) string {
	if p == nil || p.Requirements == nil {
		return ""
	}
	var unmet []string
	if r := p.Requirements.CPU; r != nil && vcpus < r.Guest {
		unmet = append(unmet, fmt.Sprintf("%d vCPUs, %d required", vcpus, r.Guest))
	}
	if r := p.Requirements.Memory; r != nil && memory.Cmp(r.Guest) < 0 {
		unmet = append(unmet, fmt.Sprintf("%s memory, %s required", memory.String(), r.Guest.String()))
	}
	return strings.Join(unmet, "; ")
}

// VCPUs is a VM's vCPU count as KubeVirt reads it: an explicit topology
// wins, else the CPU limit or request rounded up, else one vCPU.
func VCPUs(domain *kubevirtv1.DomainSpec) int64 {
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

// GuestMemory is a VM's memory as KubeVirt reads it: guest memory wins, else
// the memory request, else the limit.
func GuestMemory(domain *kubevirtv1.DomainSpec) (resource.Quantity, bool) {
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

// nodeInfo is the VM's architecture: the template's, else the preference's
// preferred one, else amd64.
func nodeInfo(spec *kubevirtv1.VirtualMachineSpec, p *instancetypev1beta1.VirtualMachinePreferenceSpec) infrav1.NodeInfo {
	arch := infrav1.ArchitectureAmd64
	switch {
	case spec.Template != nil && spec.Template.Spec.Architecture != "":
		arch = infrav1.Architecture(spec.Template.Spec.Architecture)
	case p != nil && p.PreferredArchitecture != nil && *p.PreferredArchitecture != "":
		arch = infrav1.Architecture(*p.PreferredArchitecture)
	}
	return infrav1.NodeInfo{Architecture: arch, OperatingSystem: "linux"}
}

func atLeastOne(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

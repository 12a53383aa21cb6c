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

package vmbuilder

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
)

// HugepageSize is the page size the performance preset backs memory with.
const HugepageSize = "2Mi"

// addPreset shapes the VM for the preset named in the spec, if any.
func addPreset(spec *kubevirtv1.VirtualMachineInstanceSpec, in Input) error {
	p := in.Spec.Preset
	if p == nil {
		return nil
	}
	switch p.Name {
	case infrav1.PresetPerformance:
		return performance(&spec.Domain, in.NUMAPassthrough)
	case infrav1.PresetDensity:
		return density(&spec.Domain, p.MemoryOvercommitPercent)
	}
	return fmt.Errorf("unknown preset %q: use %s or %s", p.Name, infrav1.PresetPerformance, infrav1.PresetDensity)
}

// performance pins the vCPUs to dedicated host CPUs with the emulator thread
// on its own CPU, backs memory with 2Mi hugepages, gives disks IO threads
// and makes the launcher pod Guaranteed (memory request equal to limit;
// KubeVirt sets the CPU request and limit itself for dedicated CPUs, see
// docs/kubevirt-behaviour.md#dedicated-cpus-and-hugepages). NUMA passthrough
// is added only when the infra cluster's KubeVirt enables it.
func performance(d *kubevirtv1.DomainSpec, numa bool) error {
	memory, ok := capacity.GuestMemory(d)
	if !ok {
		return errors.New("the performance preset needs the VM's memory: set domain.memory.guest or domain.resources.requests.memory")
	}
	if d.CPU == nil {
		d.CPU = &kubevirtv1.CPU{}
	}
	d.CPU.DedicatedCPUPlacement = true
	d.CPU.IsolateEmulatorThread = true
	if numa && d.CPU.NUMA == nil {
		d.CPU.NUMA = &kubevirtv1.NUMA{GuestMappingPassthrough: &kubevirtv1.NUMAGuestMappingPassthrough{}}
	}
	if d.Memory == nil {
		d.Memory = &kubevirtv1.Memory{}
	}
	if d.Memory.Hugepages == nil {
		d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: HugepageSize}
	}
	if d.IOThreadsPolicy == nil {
		auto := kubevirtv1.IOThreadsPolicyAuto
		d.IOThreadsPolicy = &auto
	}
	setResource(&d.Resources.Requests, corev1.ResourceMemory, memory)
	setResource(&d.Resources.Limits, corev1.ResourceMemory, memory)
	return nil
}

// density gives the guest its memory while the launcher pod requests only
// 100/percent of it, and leaves the CPU burstable: no CPU request or limit,
// so KubeVirt requests vCPUs divided by its cpuAllocationRatio.
func density(d *kubevirtv1.DomainSpec, percent int32) error {
	memory, ok := capacity.GuestMemory(d)
	if !ok {
		return errors.New("the density preset needs the VM's memory: set domain.memory.guest or domain.resources.requests.memory")
	}
	if percent == 0 {
		percent = infrav1.DefaultMemoryOvercommitPercent
	}
	if d.Memory == nil {
		d.Memory = &kubevirtv1.Memory{}
	}
	d.Memory.Guest = &memory
	request := resource.NewQuantity(memory.Value()*100/int64(percent), resource.BinarySI)
	setResource(&d.Resources.Requests, corev1.ResourceMemory, *request)
	if d.CPU == nil || d.CPU.Sockets == 0 && d.CPU.Cores == 0 && d.CPU.Threads == 0 {
		// Without a topology KubeVirt counts vCPUs from the CPU request or
		// limit, which are dropped below: keep the count as cores.
		if d.CPU == nil {
			d.CPU = &kubevirtv1.CPU{}
		}
		d.CPU.Cores = uint32(capacity.VCPUs(d))
	}
	delete(d.Resources.Requests, corev1.ResourceCPU)
	delete(d.Resources.Limits, corev1.ResourceCPU)
	return nil
}

func setResource(list *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[name] = q
}

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

package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
)

// validateHotplugMaxima refuses what virt-api refuses of a VM that sets
// its own CPU or memory maximum under the LiveUpdate rollout strategy,
// KubeVirt's default (vms-admitter and pkg/liveupdate/memory of v1.7.0;
// docs/kubevirt-behaviour.md#cpu-and-memory-hot-plug): more sockets than
// maxSockets, and for maxGuest a guest size set, within it, in KubeVirt's
// steps, of at least 1Gi, on amd64, without realtime, guest mapping
// passthrough or encryption.
func validateHotplugMaxima(vmi *kubevirtv1.VirtualMachineInstanceSpec, vmiPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	domain, domainPath := &vmi.Domain, vmiPath.Child("domain")
	if cpu := domain.CPU; cpu != nil && cpu.MaxSockets != 0 && cpu.Sockets > cpu.MaxSockets {
		errs = append(errs, field.Invalid(domainPath.Child("cpu", "sockets"), cpu.Sockets,
			fmt.Sprintf("more than maxSockets, %d: KubeVirt refuses more CPU sockets than the maximum", cpu.MaxSockets)))
	}
	m := domain.Memory
	if m == nil || m.MaxGuest == nil {
		return errs
	}
	memPath := domainPath.Child("memory")
	if m.Guest == nil {
		return append(errs, field.Required(memPath.Child("guest"), "KubeVirt needs the guest size when maxGuest is set"))
	}
	step, least := inplace.MemoryStep(m), inplace.MinimumMemory()
	switch {
	case m.Guest.Cmp(*m.MaxGuest) > 0:
		errs = append(errs, field.Invalid(memPath.Child("guest"), m.Guest.String(), "more than maxGuest, "+m.MaxGuest.String()))
	case m.Guest.Cmp(least) < 0:
		errs = append(errs, field.Invalid(memPath.Child("guest"), m.Guest.String(),
			"KubeVirt hot-plugs memory, which maxGuest asks for, only from "+least.String()))
	}
	for name, q := range map[string]int64{"guest": m.Guest.Value(), "maxGuest": m.MaxGuest.Value()} {
		if q%step.Value() != 0 {
			errs = append(errs, field.Invalid(memPath.Child(name), q, "must be a multiple of "+step.String()+" when maxGuest is set"))
		}
	}
	switch {
	case vmi.Architecture != "" && vmi.Architecture != "amd64":
		errs = append(errs, field.Forbidden(memPath.Child("maxGuest"), "KubeVirt hot-plugs memory on amd64 only, and the VM is "+vmi.Architecture))
	case domain.CPU != nil && domain.CPU.Realtime != nil:
		errs = append(errs, field.Forbidden(memPath.Child("maxGuest"), "KubeVirt hot-plugs no memory into realtime VMs"))
	case domain.CPU != nil && domain.CPU.NUMA != nil && domain.CPU.NUMA.GuestMappingPassthrough != nil:
		errs = append(errs, field.Forbidden(memPath.Child("maxGuest"), "KubeVirt hot-plugs no memory with guest mapping passthrough"))
	case domain.LaunchSecurity != nil:
		errs = append(errs, field.Forbidden(memPath.Child("maxGuest"), "KubeVirt hot-plugs no memory into encrypted VMs"))
	}
	sortErrors(errs)
	return errs
}

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

package capacity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestFromVirtualMachine(t *testing.T) {
	q := resource.MustParse
	vm := func(domain kubevirtv1.DomainSpec) *kubevirtv1.VirtualMachineSpec {
		return &kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: domain}}}
	}
	guest := func(s string) *kubevirtv1.Memory { m := q(s); return &kubevirtv1.Memory{Guest: &m} }
	cases := []struct {
		name         string
		spec         *kubevirtv1.VirtualMachineSpec
		instancetype *instancetypev1beta1.VirtualMachineInstancetypeSpec
		cpu          int64
		memory       string
		reason       string
	}{
		{"topology and guest memory", vm(kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Sockets: 2, Cores: 2, Threads: 2}, Memory: guest("8Gi")}),
			nil, 8, "8Gi", infrav1.FromTemplateReason},
		{"cores only", vm(kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 3}, Memory: guest("2Gi")}), nil, 3, "2Gi", infrav1.FromTemplateReason},
		{"no CPU given is one vCPU", vm(kubevirtv1.DomainSpec{Memory: guest("1Gi")}), nil, 1, "1Gi", infrav1.FromTemplateReason},
		{"CPU limit rounds up", vm(kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1500m")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("3Gi")}}}), nil, 2, "3Gi", infrav1.FromTemplateReason},
		{"memory request without guest", vm(kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")}}}), nil, 2, "4Gi", infrav1.FromTemplateReason},
		{"memory limit only", vm(kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: q("6Gi")}}}), nil, 1, "6Gi", infrav1.FromTemplateReason},
		{"no memory at all", vm(kubevirtv1.DomainSpec{}), nil, 0, "", infrav1.CapacityUnknownReason},
		{"no template", &kubevirtv1.VirtualMachineSpec{}, nil, 0, "", infrav1.CapacityUnknownReason},
		{"instance type", func() *kubevirtv1.VirtualMachineSpec {
			s := vm(kubevirtv1.DomainSpec{})
			s.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.large"}
			return s
		}(), &instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU: instancetypev1beta1.CPUInstancetype{Guest: 4}, Memory: instancetypev1beta1.MemoryInstancetype{Guest: q("16Gi")}},
			4, "16Gi", infrav1.FromInstancetypeReason},
		{"instance type missing", func() *kubevirtv1.VirtualMachineSpec {
			s := vm(kubevirtv1.DomainSpec{Memory: guest("1Gi")})
			s.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "gone"}
			return s
		}(), nil, 0, "", infrav1.CapacityUnknownReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromVirtualMachine(tc.spec, Sources{Instancetype: tc.instancetype})
			if got.Reason != tc.reason {
				t.Fatalf("reason = %s (%s), want %s", got.Reason, got.Message, tc.reason)
			}
			if got.Known() != (tc.reason != infrav1.CapacityUnknownReason) {
				t.Errorf("Known() = %v", got.Known())
			}
			if !got.Known() {
				if got.Capacity != nil || got.Message == "" {
					t.Errorf("unknown capacity should have no values and a message: %+v", got)
				}
				return
			}
			if cpu := got.Capacity.Cpu().Value(); cpu != tc.cpu {
				t.Errorf("cpu = %d, want %d", cpu, tc.cpu)
			}
			if mem := got.Capacity.Memory(); !mem.Equal(q(tc.memory)) {
				t.Errorf("memory = %s, want %s", mem, tc.memory)
			}
			if got.NodeInfo != (infrav1.NodeInfo{Architecture: infrav1.ArchitectureAmd64, OperatingSystem: "linux"}) {
				t.Errorf("nodeInfo = %+v", got.NodeInfo)
			}
		})
	}
}

func TestDevicesAndPreferences(t *testing.T) {
	q := resource.MustParse
	withInstancetype := func(domain kubevirtv1.DomainSpec, preference string) *kubevirtv1.VirtualMachineSpec {
		s := &kubevirtv1.VirtualMachineSpec{
			Instancetype: &kubevirtv1.InstancetypeMatcher{Name: "standard-4"},
			Template:     &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: domain}},
		}
		if preference != "" {
			s.Preference = &kubevirtv1.PreferenceMatcher{Name: preference}
		}
		return s
	}
	standard4 := &instancetypev1beta1.VirtualMachineInstancetypeSpec{
		CPU: instancetypev1beta1.CPUInstancetype{Guest: 4}, Memory: instancetypev1beta1.MemoryInstancetype{Guest: q("16Gi")},
		GPUs: []kubevirtv1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/TU104GL_Tesla_T4"}},
	}
	arm := "arm64"
	cases := []struct {
		name       string
		spec       *kubevirtv1.VirtualMachineSpec
		src        Sources
		want       corev1.ResourceList
		arch       infrav1.Architecture
		reason     string
		messageHas string
	}{
		{"GPUs of the instance type and the template add up per vendor; host devices by name",
			withInstancetype(kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
				GPUs:        []kubevirtv1.GPU{{Name: "gpu2", DeviceName: "nvidia.com/GA102GL_A10"}},
				HostDevices: []kubevirtv1.HostDevice{{Name: "nic", DeviceName: "intel.com/sriov"}, {Name: "nic2", DeviceName: "intel.com/sriov"}},
			}}, ""),
			Sources{Instancetype: standard4},
			corev1.ResourceList{"cpu": q("4"), "memory": q("16Gi"), "nvidia.com/gpu": q("2"), "intel.com/sriov": q("2")},
			infrav1.ArchitectureAmd64, infrav1.FromInstancetypeReason, ""},
		{"a preference's architecture is the node's",
			withInstancetype(kubevirtv1.DomainSpec{}, "arm"),
			Sources{Instancetype: standard4, Preference: &instancetypev1beta1.VirtualMachinePreferenceSpec{PreferredArchitecture: &arm}},
			corev1.ResourceList{"cpu": q("4"), "memory": q("16Gi"), "nvidia.com/gpu": q("1")},
			"arm64", infrav1.FromInstancetypeReason, ""},
		{"an instance type short of the preference's requirements is refused by KubeVirt, so the capacity is unknown",
			withInstancetype(kubevirtv1.DomainSpec{}, "big"),
			Sources{Instancetype: standard4, Preference: &instancetypev1beta1.VirtualMachinePreferenceSpec{
				Requirements: &instancetypev1beta1.PreferenceRequirements{
					CPU:    &instancetypev1beta1.CPUPreferenceRequirement{Guest: 8},
					Memory: &instancetypev1beta1.MemoryPreferenceRequirement{Guest: q("32Gi")}}}},
			nil, infrav1.ArchitectureAmd64, infrav1.CapacityUnknownReason, "4 vCPUs, 8 required; 16Gi memory, 32Gi required"},
		{"a missing preference makes the capacity unknown",
			withInstancetype(kubevirtv1.DomainSpec{}, "gone"), Sources{Instancetype: standard4},
			nil, infrav1.ArchitectureAmd64, infrav1.CapacityUnknownReason, `preference "gone" was not found`},
		{"a template short of the preference's requirements",
			func() *kubevirtv1.VirtualMachineSpec {
				s := withInstancetype(kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 1}, Memory: &kubevirtv1.Memory{Guest: ptr.To(q("2Gi"))}}, "big")
				s.Instancetype = nil
				return s
			}(),
			Sources{Preference: &instancetypev1beta1.VirtualMachinePreferenceSpec{Requirements: &instancetypev1beta1.PreferenceRequirements{
				CPU: &instancetypev1beta1.CPUPreferenceRequirement{Guest: 2}}}},
			nil, infrav1.ArchitectureAmd64, infrav1.CapacityUnknownReason, "the VM template does not meet preference \"big\": 1 vCPUs, 2 required"},
		{"template GPUs without an instance type",
			&kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2}, Memory: &kubevirtv1.Memory{Guest: ptr.To(q("4Gi"))},
					Devices: kubevirtv1.Devices{GPUs: []kubevirtv1.GPU{{Name: "g", DeviceName: "amd.com/MI210"}}}}}}},
			Sources{}, corev1.ResourceList{"cpu": q("2"), "memory": q("4Gi"), "amd.com/gpu": q("1")},
			infrav1.ArchitectureAmd64, infrav1.FromTemplateReason, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromVirtualMachine(tc.spec, tc.src)
			if got.Reason != tc.reason {
				t.Fatalf("reason = %s (%s), want %s", got.Reason, got.Message, tc.reason)
			}
			if !strings.Contains(got.Message, tc.messageHas) {
				t.Errorf("message %q does not contain %q", got.Message, tc.messageHas)
			}
			if len(got.Capacity) != len(tc.want) {
				t.Errorf("capacity = %v, want %v", got.Capacity, tc.want)
			}
			for name, want := range tc.want {
				if have, ok := got.Capacity[name]; !ok || !have.Equal(want) {
					t.Errorf("%s = %v, want %s", name, got.Capacity[name], want.String())
				}
			}
			if got.NodeInfo.Architecture != tc.arch {
				t.Errorf("architecture = %s, want %s", got.NodeInfo.Architecture, tc.arch)
			}
		})
	}
}

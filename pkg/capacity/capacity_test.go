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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
			got := FromVirtualMachine(tc.spec, tc.instancetype)
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

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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// TestValidatePlacementAndPreset covers the webhook's own rules, including
// those the CRD schema also enforces (the webhook serves templates the
// schema has not seen, such as ClusterClass patch results in dry runs).
func TestValidatePlacementAndPreset(t *testing.T) {
	spec := func(mutate func(s *infrav1.KubevirtMachineSpec)) *infrav1.KubevirtMachineSpec {
		s := &infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: kubevirtv1.VirtualMachineSpec{
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
				CPU: &kubevirtv1.CPU{Cores: 2}, Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("4Gi"))}}}}}}}
		mutate(s)
		return s
	}
	hard := func(key string, values ...string) *infrav1.NodeAffinityPreset {
		return &infrav1.NodeAffinityPreset{Type: infrav1.PresetHard, Key: key, Values: values}
	}
	domain := "spec.virtualMachineTemplate.spec.template.spec.domain"
	tests := []struct {
		name string
		spec *infrav1.KubevirtMachineSpec
		want []string // field paths, empty when valid
	}{
		{"empty is valid", spec(func(*infrav1.KubevirtMachineSpec) {}), nil},
		{"unknown strengths and policy", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Placement.PodAffinityPreset, s.Placement.PodAntiAffinityPreset, s.Placement.TopologySpread.Policy = "x", "y", "z"
		}), []string{"spec.placement.podAffinityPreset", "spec.placement.podAntiAffinityPreset", "spec.placement.topologySpread.policy"}},
		{"negative skew", spec(func(s *infrav1.KubevirtMachineSpec) { s.Placement.TopologySpread.MaxSkew = -1 }), []string{"spec.placement.topologySpread.maxSkew"}},
		{"node preset without type, key or values", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Placement.NodeAffinityPreset = &infrav1.NodeAffinityPreset{}
		}), []string{"spec.placement.nodeAffinityPreset.type", "spec.placement.nodeAffinityPreset.key", "spec.placement.nodeAffinityPreset.values"}},
		{"hard affinity with a hard spread of skew 1 over another key", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Placement.PodAffinityPreset = infrav1.PresetHard
			s.Placement.TopologySpread = infrav1.TopologySpreadSpec{Policy: infrav1.SpreadHard, TopologyKey: corev1.LabelTopologyZone}
		}), []string{"spec.placement.topologySpread.policy"}},
		{"hard affinity with a hard spread of skew 3 can hold", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Placement.PodAffinityPreset = infrav1.PresetHard
			s.Placement.TopologySpread = infrav1.TopologySpreadSpec{Policy: infrav1.SpreadHard, MaxSkew: 3}
		}), nil},
		{"hard node anti-affinity leaving one allowed value is fine", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Placement.NodeAffinityPreset = hard("pool", "a", "b")
			s.Placement.NodeAntiAffinityPreset = hard("pool", "b")
		}), nil},
		{"preset unknown", spec(func(s *infrav1.KubevirtMachineSpec) { s.Preset = &infrav1.PresetSpec{Name: "turbo"} }), []string{"spec.preset.name"}},
		{"overcommit out of range", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Preset = &infrav1.PresetSpec{Name: infrav1.PresetDensity, MemoryOvercommitPercent: 1001}
		}), []string{"spec.preset.memoryOvercommitPercent"}},
		{"performance memory not a whole number of 2Mi pages", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("4G"))
			s.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
		}), []string{domain + ".memory"}},
		{"performance memory in 1Gi pages", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "1Gi"}
			s.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("4608Mi"))
			s.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
		}), []string{domain + ".memory"}},
		{"performance with fractional and unequal CPUs", spec(func(s *infrav1.KubevirtMachineSpec) {
			d := &s.VirtualMachineTemplate.Spec.Template.Spec.Domain
			d.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
			d.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			s.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
		}), []string{domain + ".resources.requests.cpu", domain + ".resources.limits.cpu"}},
		{"performance with whole CPUs and Gi memory is fine", spec(func(s *infrav1.KubevirtMachineSpec) {
			s.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
		}), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := field.NewPath("spec")
			errs := append(validatePlacement(&tc.spec.Placement, root.Child("placement")), validatePreset(tc.spec, root)...)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors at %v, want at %v: %v", got, tc.want, errs)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("error %d at %s, want %s: %v", i, got[i], tc.want[i], errs[i])
				}
			}
		})
	}
}

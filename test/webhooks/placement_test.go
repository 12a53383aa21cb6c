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

package webhooks_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// placement mutates the placement of a machine.
func placement(mutate func(p *infrav1.PlacementSpec)) client.Object {
	return machine(func(m *infrav1.KubevirtMachine) { mutate(&m.Spec.Placement) })
}

// TestAdmissionPlacementAndPresets sends every bad value of the placement
// and sizing preset fields to the real API server (schema and webhook) and
// checks each is refused at its field path, and that good ones pass.
func TestAdmissionPlacementAndPresets(t *testing.T) {
	hard := func(key string, values ...string) *infrav1.NodeAffinityPreset {
		return &infrav1.NodeAffinityPreset{Type: infrav1.PresetHard, Key: key, Values: values}
	}
	bad := []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"pod affinity preset unknown", placement(func(p *infrav1.PlacementSpec) { p.PodAffinityPreset = "always" }), "spec.placement.podAffinityPreset"},
		{"pod anti-affinity preset unknown", placement(func(p *infrav1.PlacementSpec) { p.PodAntiAffinityPreset = "Hard" }), "spec.placement.podAntiAffinityPreset"},
		{"pod affinity topology key invalid", placement(func(p *infrav1.PlacementSpec) { p.PodAffinityTopologyKey = "-zone" }), "spec.placement.podAffinityTopologyKey"},
		{"hard affinity and hard anti-affinity to the same group", placement(func(p *infrav1.PlacementSpec) {
			p.PodAffinityPreset, p.PodAntiAffinityPreset = infrav1.PresetHard, infrav1.PresetHard
		}), "spec.placement.podAntiAffinityPreset"},
		{"hard affinity with a hard spread over the same key", placement(func(p *infrav1.PlacementSpec) {
			p.PodAffinityPreset = infrav1.PresetHard
			p.TopologySpread.Policy = infrav1.SpreadHard
		}), "spec.placement.topologySpread.policy"},
		{"node affinity type unknown", placement(func(p *infrav1.PlacementSpec) {
			p.NodeAffinityPreset = &infrav1.NodeAffinityPreset{Type: "strict", Key: "pool", Values: []string{"a"}}
		}), "spec.placement.nodeAffinityPreset.type"},
		{"node affinity without values", placement(func(p *infrav1.PlacementSpec) { p.NodeAffinityPreset = hard("pool") }), "spec.placement.nodeAffinityPreset.values"},
		{"node affinity key invalid", placement(func(p *infrav1.PlacementSpec) { p.NodeAffinityPreset = hard("bad key", "a") }), "spec.placement.nodeAffinityPreset.key"},
		{"node affinity value invalid", placement(func(p *infrav1.PlacementSpec) { p.NodeAffinityPreset = hard("pool", "not a value") }), "spec.placement.nodeAffinityPreset.values[0]"},
		{"node anti-affinity without key", placement(func(p *infrav1.PlacementSpec) {
			p.NodeAntiAffinityPreset = &infrav1.NodeAffinityPreset{Type: infrav1.PresetSoft, Values: []string{"a"}}
		}), "spec.placement.nodeAntiAffinityPreset.key"},
		{"hard node anti-affinity excludes every value the hard affinity requires", placement(func(p *infrav1.PlacementSpec) {
			p.NodeAffinityPreset = hard("pool", "a")
			p.NodeAntiAffinityPreset = hard("pool", "a", "b")
		}), "spec.placement.nodeAntiAffinityPreset"},
		{"spread policy unknown", placement(func(p *infrav1.PlacementSpec) { p.TopologySpread.Policy = "Strict" }), "spec.placement.topologySpread.policy"},
		{"spread topology key invalid", placement(func(p *infrav1.PlacementSpec) { p.TopologySpread.TopologyKey = "a/b/c" }), "spec.placement.topologySpread.topologyKey"},
		{"spread max skew below 1", placement(func(p *infrav1.PlacementSpec) { p.TopologySpread.MaxSkew = -1 }), "spec.placement.topologySpread.maxSkew"},
		{"preset unknown", machine(func(m *infrav1.KubevirtMachine) { m.Spec.Preset = &infrav1.PresetSpec{Name: "turbo"} }), "spec.preset.name"},
		{"overcommit on the performance preset", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance, MemoryOvercommitPercent: 150}
		}), "spec.preset.memoryOvercommitPercent"},
		{"overcommit below 100 percent", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetDensity, MemoryOvercommitPercent: 50}
		}), "spec.preset.memoryOvercommitPercent"},
		{"preset with an instance type", machine(func(m *infrav1.KubevirtMachine) {
			vm := &m.Spec.VirtualMachineTemplate.Spec
			vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "standard-4"}
			vm.Template.Spec.Domain.CPU, vm.Template.Spec.Domain.Memory = nil, nil
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
		}), "spec.preset.name"},
		{"density with dedicated CPUs", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.DedicatedCPUPlacement = true
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetDensity}
		}), vmiSpec + ".domain.cpu.dedicatedCpuPlacement"},
		{"density with a memory limit", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetDensity}
		}), vmiSpec + ".domain.resources.limits.memory"},
		{"template placement is checked at the template's path", machineTemplate(func(t *infrav1.KubevirtMachineTemplate) {
			t.Spec.Template.Spec.Placement.NodeAffinityPreset = hard("pool")
		}), "spec.template.spec.placement.nodeAffinityPreset.values"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			expectInvalid(t, env.Client.Create(context.Background(), tc.obj), tc.field)
		})
	}

	good := map[string]client.Object{
		"every placement knob": placement(func(p *infrav1.PlacementSpec) {
			p.PodAffinityPreset, p.PodAntiAffinityPreset = infrav1.PresetSoft, infrav1.PresetHard
			p.PodAffinityTopologyKey = corev1.LabelTopologyZone
			p.NodeAffinityPreset = hard("pool", "a", "b")
			p.NodeAntiAffinityPreset = hard("pool", "b")
			p.TopologySpread = infrav1.TopologySpreadSpec{Policy: infrav1.SpreadHard, TopologyKey: corev1.LabelTopologyZone, MaxSkew: 2}
		}),
		"density with overcommit": machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetDensity, MemoryOvercommitPercent: 200}
		}),
		"performance": machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
			m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.DedicatedCPUPlacement = true
		}),
	}
	for name, obj := range good {
		t.Run("accepts "+name, func(t *testing.T) {
			if err := env.Client.Create(context.Background(), obj); err != nil {
				t.Fatalf("refused: %v", err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
		})
	}
}

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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestPlacement(t *testing.T) {
	// Tainted nodes (a GPU node, a cordoned one) are no domains of the
	// provider's spread; the template's own spread is kept as written.
	honor := corev1.NodeInclusionPolicyHonor
	mdGroup := &metav1.LabelSelector{MatchLabels: map[string]string{
		infrav1.ClusterNameLabel: "c1", infrav1.KubevirtMachineNamespaceLabel: "tenant", infrav1.MachineDeploymentLabel: "md-0"}}
	cpGroup := &metav1.LabelSelector{MatchLabels: map[string]string{
		infrav1.ClusterNameLabel: "c1", infrav1.KubevirtMachineNamespaceLabel: "tenant", infrav1.RoleLabel: infrav1.RoleControlPlane}}
	hostTerm := func(g *metav1.LabelSelector) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{LabelSelector: g, TopologyKey: corev1.LabelHostname}
	}
	defaultSpread := func(g *metav1.LabelSelector) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: g, NodeTaintsPolicy: &honor}}
	}
	userNode := corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}
	tests := []struct {
		name         string
		modify       func(*Input)
		wantAffinity *corev1.Affinity
		wantSpread   []corev1.TopologySpreadConstraint
	}{
		{"defaults: no affinity, a soft spread over hosts among the MachineDeployment", nil, nil, defaultSpread(mdGroup)},
		{"control plane spreads among the control plane", func(in *Input) { in.ControlPlane = true; in.MachineDeployment = "" }, nil, defaultSpread(cpGroup)},
		{"hard anti-affinity is a required term over hosts", func(in *Input) {
			in.ControlPlane = true
			in.MachineDeployment = ""
			in.Spec.Placement.PodAntiAffinityPreset = infrav1.PresetHard
		}, &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{hostTerm(cpGroup)}}}, defaultSpread(cpGroup)},
		{"soft affinity over zones is a preferred term", func(in *Input) {
			in.Spec.Placement.PodAffinityPreset = infrav1.PresetSoft
			in.Spec.Placement.PodAffinityTopologyKey = corev1.LabelTopologyZone
		}, &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: mdGroup, TopologyKey: corev1.LabelTopologyZone}}}}}, defaultSpread(mdGroup)},
		{"hard node presets narrow the user's required terms; soft ones are preferred", func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{userNode}}}}}}
			in.Spec.Placement.NodeAffinityPreset = &infrav1.NodeAffinityPreset{Type: infrav1.PresetHard, Key: "pool", Values: []string{"a", "b"}}
			in.Spec.Placement.NodeAntiAffinityPreset = &infrav1.NodeAffinityPreset{Type: infrav1.PresetSoft, Key: "maintenance", Values: []string{"soon"}}
		}, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{userNode, {Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "maintenance", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"soon"}}}}}},
		}}, defaultSpread(mdGroup)},
		{"the user's anti-affinity terms are kept next to the preset's", func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "rack",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
			in.Spec.Placement.PodAntiAffinityPreset = infrav1.PresetSoft
		}, &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "rack",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: hostTerm(mdGroup)}},
		}}, defaultSpread(mdGroup)},
		{"hard spread over zones with skew 2", func(in *Input) {
			in.Spec.Placement.TopologySpread = infrav1.TopologySpreadSpec{Policy: infrav1.SpreadHard, TopologyKey: corev1.LabelTopologyZone, MaxSkew: 2}
		}, nil, []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: mdGroup, NodeTaintsPolicy: &honor}}},
		{"policy None adds no spread", func(in *Input) { in.Spec.Placement.TopologySpread.Policy = infrav1.SpreadNone }, nil, nil},
		{"the template's own spread wins", func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
				{MaxSkew: 3, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, nil, []corev1.TopologySpreadConstraint{{MaxSkew: 3, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}},
		{"a worker outside a MachineDeployment spreads among its role", func(in *Input) { in.MachineDeployment = "" }, nil,
			defaultSpread(&metav1.LabelSelector{MatchLabels: map[string]string{
				infrav1.ClusterNameLabel: "c1", infrav1.KubevirtMachineNamespaceLabel: "tenant", infrav1.RoleLabel: infrav1.RoleWorker}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			if tc.modify != nil {
				tc.modify(&in)
			}
			vm, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			spec := vm.Spec.Template.Spec
			if !equality.Semantic.DeepEqual(spec.Affinity, tc.wantAffinity) {
				t.Errorf("affinity:\n got %+v\nwant %+v", spec.Affinity, tc.wantAffinity)
			}
			if !equality.Semantic.DeepEqual(spec.TopologySpreadConstraints, tc.wantSpread) {
				t.Errorf("spread:\n got %+v\nwant %+v", spec.TopologySpreadConstraints, tc.wantSpread)
			}
			for _, c := range spec.TopologySpreadConstraints {
				if c.LabelSelector == nil {
					continue
				}
				// The launcher pod carries the instance labels: the VM must
				// count itself, or the spread is skewed from the start.
				sel, _ := metav1.LabelSelectorAsSelector(c.LabelSelector)
				if !sel.Matches(labels.Set(vm.Spec.Template.ObjectMeta.Labels)) {
					t.Errorf("spread selector %v does not select the VM's own instance labels %v", sel, vm.Spec.Template.ObjectMeta.Labels)
				}
			}
		})
	}
}

func TestPresets(t *testing.T) {
	q := resource.MustParse
	auto := kubevirtv1.IOThreadsPolicyAuto
	tests := []struct {
		name    string
		preset  *infrav1.PresetSpec
		numa    bool
		domain  func(*kubevirtv1.DomainSpec)
		want    func(t *testing.T, d kubevirtv1.DomainSpec)
		wantErr string
	}{
		{"performance: dedicated CPUs, isolated emulator thread, hugepages, IO threads, Guaranteed memory, no NUMA by default",
			&infrav1.PresetSpec{Name: infrav1.PresetPerformance}, false, func(d *kubevirtv1.DomainSpec) { d.CPU = &kubevirtv1.CPU{Cores: 4} },
			func(t *testing.T, d kubevirtv1.DomainSpec) {
				want := kubevirtv1.DomainSpec{
					CPU:             &kubevirtv1.CPU{Cores: 4, DedicatedCPUPlacement: true, IsolateEmulatorThread: true},
					Memory:          &kubevirtv1.Memory{Guest: ptr.To(q("2Gi")), Hugepages: &kubevirtv1.Hugepages{PageSize: "2Mi"}},
					IOThreadsPolicy: &auto,
					Resources: kubevirtv1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: q("2Gi")}},
				}
				d.Devices = kubevirtv1.Devices{}
				if !equality.Semantic.DeepEqual(d, want) {
					t.Errorf("domain:\n got %+v\nwant %+v", d, want)
				}
			}, ""},
		{"performance with NUMA enabled on the infra maps the guest NUMA topology",
			&infrav1.PresetSpec{Name: infrav1.PresetPerformance}, true, nil,
			func(t *testing.T, d kubevirtv1.DomainSpec) {
				if d.CPU.NUMA == nil || d.CPU.NUMA.GuestMappingPassthrough == nil {
					t.Errorf("NUMA passthrough missing: %+v", d.CPU)
				}
			}, ""},
		{"performance keeps the user's page size",
			&infrav1.PresetSpec{Name: infrav1.PresetPerformance}, false,
			func(d *kubevirtv1.DomainSpec) { d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "1Gi"} },
			func(t *testing.T, d kubevirtv1.DomainSpec) {
				if d.Memory.Hugepages.PageSize != "1Gi" {
					t.Errorf("page size %s", d.Memory.Hugepages.PageSize)
				}
			}, ""},
		{"density: guest keeps its memory, the pod requests 100/150 of it, CPU burstable",
			&infrav1.PresetSpec{Name: infrav1.PresetDensity}, false,
			func(d *kubevirtv1.DomainSpec) {
				d.Memory = nil
				d.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: q("3Gi"), corev1.ResourceCPU: q("2")}
				d.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: q("2")}
			},
			func(t *testing.T, d kubevirtv1.DomainSpec) {
				if !d.Memory.Guest.Equal(q("3Gi")) {
					t.Errorf("guest memory %s", d.Memory.Guest)
				}
				if got := d.Resources.Requests[corev1.ResourceMemory]; !got.Equal(q("2Gi")) {
					t.Errorf("memory request %s, want 2Gi", got.String())
				}
				if _, ok := d.Resources.Requests[corev1.ResourceCPU]; ok {
					t.Error("CPU request kept")
				}
				if _, ok := d.Resources.Limits[corev1.ResourceCPU]; ok {
					t.Error("CPU limit kept")
				}
				if d.CPU == nil || d.CPU.Cores != 2 {
					t.Errorf("the 2 vCPUs the request gave must stay: cpu %+v", d.CPU)
				}
			}, ""},
		{"density with 200 percent requests half",
			&infrav1.PresetSpec{Name: infrav1.PresetDensity, MemoryOvercommitPercent: 200}, false, nil,
			func(t *testing.T, d kubevirtv1.DomainSpec) {
				if got := d.Resources.Requests[corev1.ResourceMemory]; !got.Equal(q("1Gi")) {
					t.Errorf("memory request %s, want 1Gi", got.String())
				}
			}, ""},
		{"a preset needs the VM's memory", &infrav1.PresetSpec{Name: infrav1.PresetDensity}, false,
			func(d *kubevirtv1.DomainSpec) { d.Memory = nil }, nil, "the density preset needs the VM's memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			in.Spec.Preset = tc.preset
			in.NUMAPassthrough = tc.numa
			if tc.domain != nil {
				tc.domain(&in.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain)
			}
			vm, err := Build(in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, vm.Spec.Template.Spec.Domain)
		})
	}
}

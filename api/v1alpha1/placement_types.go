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

package v1alpha1

// Affinity preset strengths.
const (
	// PresetSoft becomes preferred scheduling terms: the scheduler tries,
	// and places the VM anyway when it cannot.
	PresetSoft = "soft"
	// PresetHard becomes required scheduling terms: a VM that cannot meet
	// them stays unscheduled, and its machine says why.
	PresetHard = "hard"
)

// Topology spread policies.
const (
	// SpreadSoft spreads with whenUnsatisfiable ScheduleAnyway (the default).
	SpreadSoft = "Soft"
	// SpreadHard spreads with whenUnsatisfiable DoNotSchedule.
	SpreadHard = "Hard"
	// SpreadNone adds no topology spread constraint.
	SpreadNone = "None"
)

// Sizing presets.
const (
	// PresetPerformance gives the VM dedicated CPUs with an isolated
	// emulator thread, 2Mi hugepages, IO threads and Guaranteed QoS, and NUMA
	// passthrough when the infra cluster's KubeVirt enables it.
	PresetPerformance = "performance"
	// PresetDensity overcommits the VM's memory and leaves its CPU burstable.
	PresetDensity = "density"
)

// DefaultMemoryOvercommitPercent is the density preset's default guest
// memory, in percent of the memory the launcher pod requests.
const DefaultMemoryOvercommitPercent = 150

// PlacementSpec places a machine's VM over the infra nodes with a few
// well-known knobs instead of raw affinity. What it adds is merged with the
// affinity and topology spread of the VM template, never replacing them.
type PlacementSpec struct {
	// podAffinityPreset draws the VMs of the same MachineDeployment (or
	// control plane) together: "soft" (preferred) or "hard" (required).
	// Empty adds nothing.
	// +optional
	// +kubebuilder:validation:Enum="";soft;hard
	PodAffinityPreset string `json:"podAffinityPreset,omitempty"`

	// podAntiAffinityPreset keeps the VMs of the same MachineDeployment (or
	// control plane) apart: "soft" (preferred) or "hard" (required, so one
	// VM per topology domain at most). Empty adds nothing.
	// +optional
	// +kubebuilder:validation:Enum="";soft;hard
	PodAntiAffinityPreset string `json:"podAntiAffinityPreset,omitempty"`

	// podAffinityTopologyKey is the node label the pod presets count
	// domains by. Default kubernetes.io/hostname: one infra host.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	PodAffinityTopologyKey string `json:"podAffinityTopologyKey,omitempty"`

	// nodeAffinityPreset places the VM on infra nodes whose label key has
	// one of values.
	// +optional
	NodeAffinityPreset *NodeAffinityPreset `json:"nodeAffinityPreset,omitempty"`

	// nodeAntiAffinityPreset keeps the VM off infra nodes whose label key
	// has one of values.
	// +optional
	NodeAntiAffinityPreset *NodeAffinityPreset `json:"nodeAntiAffinityPreset,omitempty"`

	// topologySpread spreads the VMs of the same MachineDeployment (or
	// control plane) over infra hosts or zones. Unless the VM template sets
	// its own topologySpreadConstraints, every VM gets one: by default
	// maxSkew 1 over kubernetes.io/hostname, ScheduleAnyway.
	// +optional
	TopologySpread TopologySpreadSpec `json:"topologySpread,omitempty,omitzero"`
}

// NodeAffinityPreset selects infra nodes by one label.
type NodeAffinityPreset struct {
	// type is "soft" (preferred) or "hard" (required).
	// +required
	// +kubebuilder:validation:Enum=soft;hard
	Type string `json:"type"`

	// key is the infra node label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`

	// values are the label values that match.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values"`
}

// TopologySpreadSpec is the spread constraint the provider adds.
type TopologySpreadSpec struct {
	// policy is "Soft" (default: ScheduleAnyway), "Hard" (DoNotSchedule: a
	// VM that would unbalance the spread waits) or "None" (add nothing).
	// +optional
	// +kubebuilder:validation:Enum=Soft;Hard;None
	Policy string `json:"policy,omitempty"`

	// topologyKey is the node label whose values are the domains to spread
	// over. Default kubernetes.io/hostname; topology.kubernetes.io/zone
	// spreads over zones.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey,omitempty"`

	// maxSkew is how many more VMs one domain may have than the emptiest.
	// Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew,omitempty"`
}

// PresetSpec shapes the VM for performance or for density.
type PresetSpec struct {
	// name is "performance" or "density".
	// +required
	// +kubebuilder:validation:Enum=performance;density
	Name string `json:"name"`

	// memoryOvercommitPercent, for density only, is the guest memory in
	// percent of what the launcher pod requests: 150 (the default) requests
	// two thirds of the guest memory.
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=1000
	MemoryOvercommitPercent int32 `json:"memoryOvercommitPercent,omitempty"`
}

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// presetWeight is the weight of a soft preset's preferred term: the most a
// single term can weigh, so a preset outweighs the scheduler's own scores.
const presetWeight = 100

// DefaultTopologyKey is the node label the pod presets and the spread
// constraint count domains by unless told otherwise: one infra host.
const DefaultTopologyKey = corev1.LabelHostname

// GroupSelector selects the VMs (and so their launcher pods, which carry the
// VM template's labels) that a machine is kept apart from or spread with:
// those of its MachineDeployment or MachinePool, else of its role (control
// plane or other workers), in one tenant cluster.
func GroupSelector(in Input) *metav1.LabelSelector {
	id := IdentityLabels(in)
	sel := ClusterSelector(in.ClusterName, in.KubevirtMachineNamespace)
	if md, ok := id[infrav1.MachineDeploymentLabel]; ok && !in.ControlPlane {
		sel[infrav1.MachineDeploymentLabel] = md
	} else if mp, ok := id[infrav1.MachinePoolLabel]; ok && !in.ControlPlane {
		sel[infrav1.MachinePoolLabel] = mp
	} else {
		sel[infrav1.RoleLabel] = id[infrav1.RoleLabel]
	}
	for k := range sel {
		if _, ok := id[k]; !ok {
			// A label value too long to be set cannot be selected either.
			delete(sel, k)
		}
	}
	return &metav1.LabelSelector{MatchLabels: sel}
}

// addPlacement merges the placement presets and the default spread into the
// VM's own affinity and spread constraints: presets add terms, never remove
// the user's.
func addPlacement(spec *kubevirtv1.VirtualMachineInstanceSpec, in Input) {
	p := in.Spec.Placement
	group := GroupSelector(in)
	key := p.PodAffinityTopologyKey
	if key == "" {
		key = DefaultTopologyKey
	}
	term := corev1.PodAffinityTerm{LabelSelector: group, TopologyKey: key}
	if preset := p.PodAffinityPreset; preset == infrav1.PresetHard || preset == infrav1.PresetSoft {
		pa := podAffinity(spec)
		addPodPreset(preset, term, &pa.RequiredDuringSchedulingIgnoredDuringExecution, &pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if preset := p.PodAntiAffinityPreset; preset == infrav1.PresetHard || preset == infrav1.PresetSoft {
		pa := podAntiAffinity(spec)
		addPodPreset(preset, term, &pa.RequiredDuringSchedulingIgnoredDuringExecution, &pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	addNodePreset(spec, p.NodeAffinityPreset, corev1.NodeSelectorOpIn)
	addNodePreset(spec, p.NodeAntiAffinityPreset, corev1.NodeSelectorOpNotIn)
	if c, ok := SpreadConstraint(p.TopologySpread, group); ok && len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
	}
}

// SpreadConstraint is the topology spread constraint the provider adds for
// spread over group, and false when the policy is None.
func SpreadConstraint(s infrav1.TopologySpreadSpec, group *metav1.LabelSelector) (corev1.TopologySpreadConstraint, bool) {
	if s.Policy == infrav1.SpreadNone {
		return corev1.TopologySpreadConstraint{}, false
	}
	// A node the VM does not tolerate is no domain to spread over: the
	// scheduler counts every node by default (nodeTaintsPolicy Ignore), so
	// a tainted GPU node, or a cordoned one, would hold none of the group
	// and leave every other node "too full" for a hard spread.
	c := corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: DefaultTopologyKey, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: group.DeepCopy(), NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
	}
	if s.MaxSkew > 0 {
		c.MaxSkew = s.MaxSkew
	}
	if s.TopologyKey != "" {
		c.TopologyKey = s.TopologyKey
	}
	if s.Policy == infrav1.SpreadHard {
		c.WhenUnsatisfiable = corev1.DoNotSchedule
	}
	return c, true
}

// addNodePreset adds a node preset with operator op (In for affinity, NotIn
// for anti-affinity): hard narrows every required term, soft adds a
// preferred term.
func addNodePreset(spec *kubevirtv1.VirtualMachineInstanceSpec, preset *infrav1.NodeAffinityPreset, op corev1.NodeSelectorOperator) {
	if preset == nil {
		return
	}
	req := corev1.NodeSelectorRequirement{Key: preset.Key, Operator: op, Values: append([]string(nil), preset.Values...)}
	if preset.Type == infrav1.PresetHard {
		requireNode(spec, req)
		return
	}
	na := nodeAffinity(spec)
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.PreferredSchedulingTerm{Weight: presetWeight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}})
}

// requireNode adds req to every required node affinity term, or creates one
// term: node terms are ORed, so adding it to each narrows the user's own
// placement rather than widening or replacing it.
func requireNode(spec *kubevirtv1.VirtualMachineInstanceSpec, req corev1.NodeSelectorRequirement) {
	na := nodeAffinity(spec)
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range sel.NodeSelectorTerms {
		sel.NodeSelectorTerms[i].MatchExpressions = append(sel.NodeSelectorTerms[i].MatchExpressions, *req.DeepCopy())
	}
}

// addPodPreset adds term to a pod affinity or anti-affinity: to its
// required terms for a hard preset, to its preferred ones for a soft one.
func addPodPreset(preset string, term corev1.PodAffinityTerm, required *[]corev1.PodAffinityTerm, preferred *[]corev1.WeightedPodAffinityTerm) {
	if preset == infrav1.PresetHard {
		*required = append(*required, *term.DeepCopy())
		return
	}
	*preferred = append(*preferred, corev1.WeightedPodAffinityTerm{Weight: presetWeight, PodAffinityTerm: *term.DeepCopy()})
}

// made returns *p, set to a new T first if nil: the affinity fields are
// pointers that placement fills in only as needed.
func made[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

func affinity(spec *kubevirtv1.VirtualMachineInstanceSpec) *corev1.Affinity {
	return made(&spec.Affinity)
}

func nodeAffinity(spec *kubevirtv1.VirtualMachineInstanceSpec) *corev1.NodeAffinity {
	return made(&affinity(spec).NodeAffinity)
}

func podAffinity(spec *kubevirtv1.VirtualMachineInstanceSpec) *corev1.PodAffinity {
	return made(&affinity(spec).PodAffinity)
}

func podAntiAffinity(spec *kubevirtv1.VirtualMachineInstanceSpec) *corev1.PodAntiAffinity {
	return made(&affinity(spec).PodAntiAffinity)
}

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
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

var (
	presetStrengths = []string{infrav1.PresetSoft, infrav1.PresetHard}
	spreadPolicies  = []string{infrav1.SpreadSoft, infrav1.SpreadHard, infrav1.SpreadNone}
	sizingPresets   = []string{infrav1.PresetPerformance, infrav1.PresetDensity}
)

// validatePlacement checks the placement presets, each on its own and
// against each other: a combination that no VM after the first can ever
// meet is refused here rather than left pending on the infra cluster.
func validatePlacement(p *infrav1.PlacementSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, value string }{
		{"podAffinityPreset", p.PodAffinityPreset}, {"podAntiAffinityPreset", p.PodAntiAffinityPreset},
	} {
		if f.value != "" && !slices.Contains(presetStrengths, f.value) {
			errs = append(errs, field.NotSupported(fld.Child(f.name), f.value, presetStrengths))
		}
	}
	if p.PodAffinityTopologyKey != "" {
		errs = append(errs, metav1validation.ValidateLabelName(p.PodAffinityTopologyKey, fld.Child("podAffinityTopologyKey"))...)
	}
	errs = append(errs, validateNodePreset(p.NodeAffinityPreset, fld.Child("nodeAffinityPreset"))...)
	errs = append(errs, validateNodePreset(p.NodeAntiAffinityPreset, fld.Child("nodeAntiAffinityPreset"))...)
	s := p.TopologySpread
	spread := fld.Child("topologySpread")
	if s.Policy != "" && !slices.Contains(spreadPolicies, s.Policy) {
		errs = append(errs, field.NotSupported(spread.Child("policy"), s.Policy, spreadPolicies))
	}
	if s.TopologyKey != "" {
		errs = append(errs, metav1validation.ValidateLabelName(s.TopologyKey, spread.Child("topologyKey"))...)
	}
	if s.MaxSkew < 0 {
		errs = append(errs, field.Invalid(spread.Child("maxSkew"), s.MaxSkew, "must be at least 1"))
	}

	podKey := cmp.Or(p.PodAffinityTopologyKey, vmbuilder.DefaultTopologyKey)
	if p.PodAffinityPreset == infrav1.PresetHard && p.PodAntiAffinityPreset == infrav1.PresetHard {
		errs = append(errs, field.Forbidden(fld.Child("podAntiAffinityPreset"),
			"hard pod affinity and hard pod anti-affinity to the same group cannot both hold for a second VM: make one of them soft"))
	}
	if p.PodAffinityPreset == infrav1.PresetHard && s.Policy == infrav1.SpreadHard && s.MaxSkew <= 1 {
		errs = append(errs, field.Forbidden(spread.Child("policy"), fmt.Sprintf(
			"a hard spread with maxSkew 1 over %s contradicts hard pod affinity, which keeps the VMs in one %s domain: make one of them soft or raise maxSkew",
			cmp.Or(s.TopologyKey, vmbuilder.DefaultTopologyKey), podKey)))
	}
	if a, anti := p.NodeAffinityPreset, p.NodeAntiAffinityPreset; a != nil && anti != nil &&
		a.Type == infrav1.PresetHard && anti.Type == infrav1.PresetHard && a.Key == anti.Key && subset(a.Values, anti.Values) {
		errs = append(errs, field.Forbidden(fld.Child("nodeAntiAffinityPreset"), fmt.Sprintf(
			"hard node anti-affinity excludes every value %v the hard node affinity requires for %s: no node can match", a.Values, a.Key)))
	}
	return errs
}

func validateNodePreset(p *infrav1.NodeAffinityPreset, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if !slices.Contains(presetStrengths, p.Type) {
		errs = append(errs, field.NotSupported(fld.Child("type"), p.Type, presetStrengths))
	}
	if p.Key == "" {
		errs = append(errs, field.Required(fld.Child("key"), "the infra node label to match"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(p.Key, fld.Child("key"))...)
	}
	if len(p.Values) == 0 {
		errs = append(errs, field.Required(fld.Child("values"), "at least one label value"))
	}
	for i, v := range p.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(fld.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

// validatePreset checks a sizing preset against the VM template it shapes:
// it sets CPU and memory itself, so it cannot go with an instance type, and
// density cannot go with what pins resources.
func validatePreset(spec *infrav1.KubevirtMachineSpec, specPath *field.Path) field.ErrorList {
	fld := specPath.Child("preset")
	p := spec.Preset
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if !slices.Contains(sizingPresets, p.Name) {
		return append(errs, field.NotSupported(fld.Child("name"), p.Name, sizingPresets))
	}
	if p.MemoryOvercommitPercent != 0 {
		switch {
		case p.Name != infrav1.PresetDensity:
			errs = append(errs, field.Forbidden(fld.Child("memoryOvercommitPercent"), "only the density preset overcommits memory"))
		case p.MemoryOvercommitPercent < 100 || p.MemoryOvercommitPercent > 1000:
			errs = append(errs, field.Invalid(fld.Child("memoryOvercommitPercent"), p.MemoryOvercommitPercent, "must be between 100 and 1000"))
		}
	}
	vm := &spec.VirtualMachineTemplate.Spec
	if vm.Instancetype != nil {
		errs = append(errs, field.Forbidden(fld.Child("name"), fmt.Sprintf(
			"a sizing preset sets the VM's CPU and memory, which instance type %q owns: drop the preset, or choose an instance type that sets dedicatedCPUPlacement, hugepages or memory.overcommitPercent", vm.Instancetype.Name)))
		return errs
	}
	if vm.Template == nil {
		return errs
	}
	d := &vm.Template.Spec.Domain
	domain := specPath.Child("virtualMachineTemplate", "spec", "template", "spec", "domain")
	if p.Name == infrav1.PresetPerformance {
		errs = append(errs, validatePerformance(d, domain)...)
	}
	if p.Name == infrav1.PresetDensity {
		if d.CPU != nil && d.CPU.DedicatedCPUPlacement {
			errs = append(errs, field.Forbidden(domain.Child("cpu", "dedicatedCpuPlacement"), "the density preset leaves the CPU burstable; dedicated CPUs need the performance preset"))
		}
		if d.Memory != nil && d.Memory.Hugepages != nil {
			errs = append(errs, field.Forbidden(domain.Child("memory", "hugepages"), "hugepages cannot be overcommitted; they need the performance preset"))
		}
		if _, ok := d.Resources.Limits[corev1.ResourceMemory]; ok {
			errs = append(errs, field.Forbidden(domain.Child("resources", "limits", "memory"), "the density preset sets the memory request below the guest memory; a memory limit would cap the guest"))
		}
	}
	return errs
}

// validatePerformance checks what KubeVirt refuses for a VM with dedicated
// CPUs and hugepages: guest memory that is not a whole number of pages, and
// CPU requests or limits that are not whole, equal CPUs.
func validatePerformance(d *kubevirtv1.DomainSpec, domain *field.Path) field.ErrorList {
	var errs field.ErrorList
	pageSize := vmbuilder.HugepageSize
	if d.Memory != nil && d.Memory.Hugepages != nil && d.Memory.Hugepages.PageSize != "" {
		pageSize = d.Memory.Hugepages.PageSize
	}
	page, err := resource.ParseQuantity(pageSize)
	if err != nil {
		return append(errs, field.Invalid(domain.Child("memory", "hugepages", "pageSize"), pageSize, "not a quantity"))
	}
	if memory, ok := capacity.GuestMemory(d); ok && page.Value() > 0 && memory.Value()%page.Value() != 0 {
		errs = append(errs, field.Invalid(domain.Child("memory"), memory.String(), fmt.Sprintf(
			"the performance preset backs memory with %s hugepages: the VM's memory must be a multiple of %s (use Mi or Gi, not M or G)", pageSize, pageSize)))
	}
	req, hasReq := d.Resources.Requests[corev1.ResourceCPU]
	lim, hasLim := d.Resources.Limits[corev1.ResourceCPU]
	for _, c := range []struct {
		set  bool
		q    resource.Quantity
		path *field.Path
	}{{hasReq, req, domain.Child("resources", "requests", "cpu")}, {hasLim, lim, domain.Child("resources", "limits", "cpu")}} {
		if c.set && c.q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(c.path, c.q.String(), "dedicated CPUs are whole CPUs"))
		}
	}
	if hasReq && hasLim && req.Cmp(lim) != 0 {
		errs = append(errs, field.Invalid(domain.Child("resources", "limits", "cpu"), lim.String(), "dedicated CPUs need the CPU request equal to the limit"))
	}
	return errs
}

// subset reports whether every value of a is in b.
func subset(a, b []string) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return len(a) > 0
}

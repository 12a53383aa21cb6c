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
	"fmt"
	"slices"

	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// PodNetworkName is the name of the pod network the builder adds when it
// attaches Multus networks to a template that has no networks at all, where
// KubeVirt would otherwise have added it (docs/kubevirt-behaviour.md#networks-and-interfaces-pair-by-name).
const PodNetworkName = "default"

// Networks merges the cluster's and the machine's Multus networks: the
// machine's replace the cluster's of the same name.
func Networks(cluster, machine []infrav1.MultusNetwork) []infrav1.MultusNetwork {
	out := make([]infrav1.MultusNetwork, 0, len(cluster)+len(machine))
	for _, n := range cluster {
		if !slices.ContainsFunc(machine, func(m infrav1.MultusNetwork) bool { return m.Name == n.Name }) {
			out = append(out, n)
		}
	}
	return append(out, machine...)
}

// addNetworks attaches the Multus networks not already in the template. A
// primary network becomes KubeVirt's default (Multus) network and comes
// first; otherwise a template without networks keeps the pod network it
// would have had, with masquerade binding so the VM stays live-migratable.
func addNetworks(spec *kubevirtv1.VirtualMachineInstanceSpec, in Input) error {
	nets := Networks(in.ClusterNetworks, in.Spec.Networks)
	if len(nets) == 0 {
		return nil
	}
	var pod string
	for _, n := range spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	var primary []string
	for _, n := range nets {
		if n.Primary {
			primary = append(primary, n.Name)
		}
	}
	switch {
	case len(primary) > 1:
		return fmt.Errorf("networks %v are all primary; at most one network may be primary", primary)
	case len(primary) == 1 && pod != "":
		return fmt.Errorf("network %q is primary, so the VM can have no pod network, but the VM template has pod network %q", primary[0], pod)
	case len(primary) == 0 && len(spec.Networks) == 0 && len(spec.Domain.Devices.Interfaces) == 0:
		spec.Networks = []kubevirtv1.Network{{Name: PodNetworkName, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: PodNetworkName,
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	}
	for _, n := range nets {
		if slices.ContainsFunc(spec.Networks, func(e kubevirtv1.Network) bool { return e.Name == n.Name }) {
			continue // the template's own network of that name is kept as written
		}
		network := kubevirtv1.Network{Name: n.Name, NetworkSource: kubevirtv1.NetworkSource{
			Multus: &kubevirtv1.MultusNetwork{NetworkName: n.NetworkAttachmentDefinition, Default: n.Primary}}}
		iface := kubevirtv1.Interface{Name: n.Name}
		if n.Binding == infrav1.BindingSRIOV {
			iface.SRIOV = &kubevirtv1.InterfaceSRIOV{}
		} else {
			iface.Bridge = &kubevirtv1.InterfaceBridge{}
		}
		hasIface := slices.ContainsFunc(spec.Domain.Devices.Interfaces, func(e kubevirtv1.Interface) bool { return e.Name == n.Name })
		switch {
		case n.Primary:
			spec.Networks = slices.Insert(spec.Networks, 0, network)
			if !hasIface {
				spec.Domain.Devices.Interfaces = slices.Insert(spec.Domain.Devices.Interfaces, 0, iface)
			}
		default:
			spec.Networks = append(spec.Networks, network)
			if !hasIface {
				spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, iface)
			}
		}
	}
	return nil
}

// NetworkSummary describes a VM's networks in one line each,
// "name:source:binding" in order (source "pod" or the Multus network, with
// "(default)" for Multus default; the matching interface's binding, or
// "none"), for tests and tools that show what the builder made.
func NetworkSummary(spec kubevirtv1.VirtualMachineInstanceSpec) []string {
	var out []string
	for _, n := range spec.Networks {
		src := "pod"
		if n.Multus != nil {
			src = n.Multus.NetworkName
			if n.Multus.Default {
				src += "(default)"
			}
		}
		binding := "none"
		for _, i := range spec.Domain.Devices.Interfaces {
			if i.Name != n.Name {
				continue
			}
			switch {
			case i.Masquerade != nil:
				binding = "masquerade"
			case i.Bridge != nil:
				binding = "bridge"
			case i.SRIOV != nil:
				binding = "sriov"
			}
		}
		out = append(out, n.Name+":"+src+":"+binding)
	}
	return out
}

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

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// validateNetworks mirrors KubeVirt's network admission: networks and
// interfaces pair up by name, each network has one source, each interface one
// binding, at most one pod network and one Multus default network.
func validateNetworks(vmi *kubevirtv1.VirtualMachineInstanceSpec, vmiPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	netPath := vmiPath.Child("networks")
	ifPath := vmiPath.Child("domain", "devices", "interfaces")

	networks := map[string]kubevirtv1.Network{}
	podNetworks, multusDefaults := 0, 0
	for i, n := range vmi.Networks {
		p := netPath.Index(i)
		if n.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "every network needs a name"))
		} else if _, dup := networks[n.Name]; dup {
			errs = append(errs, field.Duplicate(p.Child("name"), n.Name))
		}
		networks[n.Name] = n
		if c := countSet(n.NetworkSource); c != 1 {
			errs = append(errs, field.Invalid(p, n.Name, fmt.Sprintf("a network needs exactly one of pod, multus and resourceClaim, found %d", c)))
		}
		if n.Pod != nil {
			podNetworks++
		}
		if n.Multus != nil {
			if n.Multus.NetworkName == "" {
				errs = append(errs, field.Required(p.Child("multus", "networkName"), "the NetworkAttachmentDefinition, as name or namespace/name"))
			}
			if n.Multus.Default {
				multusDefaults++
			}
		}
	}
	if podNetworks > 1 {
		errs = append(errs, field.Invalid(netPath, podNetworks, "at most one pod network is allowed"))
	}
	if multusDefaults > 1 {
		errs = append(errs, field.Invalid(netPath, multusDefaults, "at most one Multus network can be the default"))
	}
	if podNetworks > 0 && multusDefaults > 0 {
		errs = append(errs, field.Invalid(netPath, "", "a pod network and a default Multus network cannot be combined"))
	}

	interfaces := sets.New[string]()
	for i, iface := range vmi.Domain.Devices.Interfaces {
		p := ifPath.Index(i)
		if interfaces.Has(iface.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), iface.Name))
		}
		interfaces.Insert(iface.Name)
		net, ok := networks[iface.Name]
		if !ok {
			errs = append(errs, field.Invalid(p.Child("name"), iface.Name, "every interface needs a network of the same name in spec.template.spec.networks"))
		}
		errs = append(errs, validateBinding(iface, net, ok, p)...)
	}
	for i, n := range vmi.Networks {
		if n.Name != "" && !interfaces.Has(n.Name) {
			errs = append(errs, field.Invalid(netPath.Index(i).Child("name"), n.Name,
				"every network needs an interface of the same name in spec.template.spec.domain.devices.interfaces"))
		}
	}
	return errs
}

func validateBinding(iface kubevirtv1.Interface, net kubevirtv1.Network, hasNet bool, p *field.Path) field.ErrorList {
	if iface.DeprecatedSlirp != nil || iface.DeprecatedMacvtap != nil {
		return field.ErrorList{field.Forbidden(p, "slirp and macvtap bindings were removed from KubeVirt; use bridge, masquerade, sriov or a binding plugin")}
	}
	// KubeVirt 1.7 refuses only a plugin beside a method; an interface
	// with no binding gets KubeVirt's default.
	if iface.Binding != nil && countSet(iface.InterfaceBindingMethod) > 0 {
		return field.ErrorList{field.Invalid(p, iface.Name,
			"an interface cannot have both a binding plugin (binding) and a binding method (bridge, masquerade, sriov or passtBinding)")}
	}
	if iface.Masquerade != nil && hasNet && net.Pod == nil {
		return field.ErrorList{field.Invalid(p.Child("masquerade"), iface.Name, "masquerade binding is only allowed on the pod network")}
	}
	return nil
}

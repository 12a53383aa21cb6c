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
	"net/netip"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// kindRE is what the API server accepts as a kind: a Go-like identifier
// starting with an upper-case letter.
var kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// validateNetworkAddresses checks the pool references, gateways and
// nameservers of spec.networkAddresses, and that nothing else writes the
// guest's network configuration: the provider writes it for these machines.
func validateNetworkAddresses(spec *infrav1.KubevirtMachineSpec, fld *field.Path) field.ErrorList {
	if len(spec.NetworkAddresses) == 0 {
		return nil
	}
	var errs field.ErrorList
	list := fld.Child("networkAddresses")
	if spec.UserData.NetworkDataSecretRef != nil {
		errs = append(errs, field.Forbidden(fld.Child("userData", "networkDataSecretRef"),
			"the provider writes the network configuration of a machine with networkAddresses; set one or the other"))
	}
	if spec.UserData.CloudInitDataSource == "ConfigDrive" {
		errs = append(errs, field.NotSupported(fld.Child("userData", "cloudInitDataSource"), "ConfigDrive",
			[]string{"NoCloud"}))
	}
	podNetworks := map[string]bool{}
	if tmpl := spec.VirtualMachineTemplate.Spec.Template; tmpl != nil {
		for _, n := range tmpl.Spec.Networks {
			podNetworks[n.Name] = n.Pod != nil
		}
	}
	for i, na := range spec.NetworkAddresses {
		p := list.Index(i)
		errs = append(errs, dns1123Label(na.Network, p.Child("network"))...)
		if podNetworks[na.Network] {
			errs = append(errs, field.Invalid(p.Child("network"), na.Network,
				"is the VM template's pod network, whose address KubeVirt hands out; name a Multus network"))
		}
		for j, ref := range na.AddressesFromPools {
			errs = append(errs, validatePoolRef(ref, p.Child("addressesFromPools").Index(j))...)
		}
		if na.Gateway != "" {
			errs = append(errs, validateIP(na.Gateway, p.Child("gateway"))...)
		}
		for j, ns := range na.Nameservers {
			errs = append(errs, validateIP(ns, p.Child("nameservers").Index(j))...)
		}
	}
	return errs
}

func validatePoolRef(ref infrav1.IPPoolReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(ref.APIGroup) {
		errs = append(errs, field.Invalid(p.Child("apiGroup"), ref.APIGroup, msg+" (an API group such as ipam.cluster.x-k8s.io)"))
	}
	if !kindRE.MatchString(ref.Kind) {
		errs = append(errs, field.Invalid(p.Child("kind"), ref.Kind,
			"must be a kind such as InClusterIPPool: a letter A-Z, then letters and digits"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
	}
	return errs
}

// validateIP accepts a plain IPv4 or IPv6 address, as netplan and
// systemd-networkd take a gateway or nameserver.
func validateIP(s string, p *field.Path) field.ErrorList {
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return field.ErrorList{field.Invalid(p, s, "must be an IPv4 or IPv6 address, such as 192.168.10.1")}
	}
	if addr.IsUnspecified() || addr.IsMulticast() {
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("%s cannot be a gateway or nameserver", s))}
	}
	return nil
}

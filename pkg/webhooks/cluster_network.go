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
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Kubernetes' limits on a pod's DNS configuration, which virt-launcher pods
// inherit.
const (
	maxDNSNameservers = 3
	maxDNSSearches    = 32
)

// validateClusterNetworking checks isolation, networks and DNS of a
// KubevirtClusterSpec.
func validateClusterNetworking(spec *infrav1.KubevirtClusterSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, cidr := range spec.Isolation.DeniedCIDRs {
		if _, _, err := net.ParseCIDR(strings.TrimSpace(cidr)); err != nil {
			errs = append(errs, field.Invalid(fld.Child("isolation", "deniedCIDRs").Index(i), cidr, "must be a CIDR such as 10.0.0.0/8 or fc00::/7"))
		}
	}
	for i, p := range spec.CustomNetworkPolicies {
		// <KubevirtCluster>-isolation and -api-server are the provider's own.
		if p.Name == "isolation" || p.Name == "api-server" {
			errs = append(errs, field.Invalid(fld.Child("customNetworkPolicies").Index(i).Child("name"), p.Name,
				"isolation and api-server name the provider's own policies; choose another name"))
		}
	}
	nets := spec.Network.Networks
	if pc := spec.Network.PerCluster; pc != nil {
		errs = append(errs, dns1123Label(pc.TemplateRef.Namespace, fld.Child("network", "perCluster", "templateRef", "namespace"))...)
		errs = append(errs, dns1123Subdomain(pc.TemplateRef.Name, fld.Child("network", "perCluster", "templateRef", "name"))...)
		name := pc.Name
		if name == "" {
			name = "tenant"
		}
		nets = append(append([]infrav1.MultusNetwork(nil), nets...), infrav1.MultusNetwork{Name: name, NetworkAttachmentDefinition: "x", Primary: pc.Primary})
		for i, n := range spec.Network.Networks {
			if n.Name == name {
				errs = append(errs, field.Duplicate(fld.Child("network", "networks").Index(i).Child("name"), n.Name))
			}
		}
	}
	errs = append(errs, validateMultusNetworks(spec.Network.Networks, fld.Child("network", "networks"))...)
	errs = append(errs, validatePrimaries(nets, fld.Child("network"))...)
	if n := spec.Network.NodeAddressNetwork; n != "" {
		errs = append(errs, dns1123Label(n, fld.Child("network", "nodeAddressNetwork"))...)
	}
	errs = append(errs, validateDNS(spec.DNSPolicy, spec.DNSConfig, fld)...)
	return errs
}

// validateMultusNetworks checks a list of Multus networks on its own.
func validateMultusNetworks(nets []infrav1.MultusNetwork, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, n := range nets {
		p := fld.Index(i)
		errs = append(errs, dns1123Label(n.Name, p.Child("name"))...)
		ns, name, qualified := strings.Cut(n.NetworkAttachmentDefinition, "/")
		if !qualified {
			name = ns
		} else {
			errs = append(errs, dns1123Label(ns, p.Child("networkAttachmentDefinition"))...)
		}
		errs = append(errs, dns1123Subdomain(name, p.Child("networkAttachmentDefinition"))...)
		if b := n.Binding; b != "" && b != infrav1.BindingBridge && b != infrav1.BindingSRIOV {
			errs = append(errs, field.NotSupported(p.Child("binding"), b, []string{infrav1.BindingBridge, infrav1.BindingSRIOV}))
		}
	}
	return errs
}

// validatePrimaries allows at most one primary network.
func validatePrimaries(nets []infrav1.MultusNetwork, fld *field.Path) field.ErrorList {
	var primary []string
	for _, n := range nets {
		if n.Primary {
			primary = append(primary, n.Name)
		}
	}
	if len(primary) > 1 {
		return field.ErrorList{field.Invalid(fld, strings.Join(primary, ","), "at most one network may be primary (replace the pod network)")}
	}
	return nil
}

// validateDNS applies Kubernetes' pod DNS rules, which the VM's launcher
// pod must pass.
func validateDNS(policy corev1.DNSPolicy, cfg *corev1.PodDNSConfig, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone && (cfg == nil || len(cfg.Nameservers) == 0) {
		errs = append(errs, field.Required(fld.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.TooMany(fld.Child("dnsConfig", "nameservers"), len(cfg.Nameservers), maxDNSNameservers))
	}
	for i, ns := range cfg.Nameservers {
		if net.ParseIP(ns) == nil {
			errs = append(errs, field.Invalid(fld.Child("dnsConfig", "nameservers").Index(i), ns, "must be an IP address"))
		}
	}
	if len(cfg.Searches) > maxDNSSearches {
		errs = append(errs, field.TooMany(fld.Child("dnsConfig", "searches"), len(cfg.Searches), maxDNSSearches))
	}
	return errs
}

// validateClusterNetworkUpdate keeps a per-cluster network as it is once
// set: running VMs are attached to it, and changing its template, VLAN or
// name (or removing it) would cut them off.
func validateClusterNetworkUpdate(oldSpec, newSpec *infrav1.KubevirtClusterSpec, fld *field.Path) field.ErrorList {
	if oldSpec.Network.PerCluster == nil || equality.Semantic.DeepEqual(oldSpec.Network.PerCluster, newSpec.Network.PerCluster) {
		return nil
	}
	return field.ErrorList{field.Forbidden(fld.Child("network", "perCluster"),
		fmt.Sprintf("cannot be changed or removed once set: the cluster's VMs are attached to it (was %s/%s)",
			oldSpec.Network.PerCluster.TemplateRef.Namespace, oldSpec.Network.PerCluster.TemplateRef.Name))}
}

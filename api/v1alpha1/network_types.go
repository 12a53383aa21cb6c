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

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// Isolation modes of a tenant cluster.
const (
	// IsolationEnabled keeps NetworkPolicies that isolate the cluster's VMs
	// (the default).
	IsolationEnabled = "Enabled"
	// IsolationDisabled keeps no isolation NetworkPolicies; custom policies
	// are still kept.
	IsolationDisabled = "Disabled"
)

// Interface bindings of a Multus network.
const (
	// BindingBridge connects the VM to the network through a Linux bridge in
	// the virt-launcher pod (the default).
	BindingBridge = "bridge"
	// BindingSRIOV passes an SR-IOV virtual function through to the VM.
	BindingSRIOV = "sriov"
)

// IsolationSpec shapes the NetworkPolicies that isolate a tenant cluster's
// VMs from other tenants and from the infra cluster. docs/isolation.md lists
// every flow and its verdict.
type IsolationSpec struct {
	// mode is Enabled (the default) or Disabled.
	// +optional
	// +kubebuilder:validation:Enum=Enabled;Disabled
	Mode string `json:"mode,omitempty"`

	// apiServerClients may reach the API server port of the control-plane
	// VMs. Empty means from anywhere, as through the control-plane Service.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	APIServerClients []networkingv1.NetworkPolicyPeer `json:"apiServerClients,omitempty"`

	// dnsResolvers may be asked on port 53 (UDP and TCP). Empty means the
	// common infra cluster DNS setups: the DNS pods of kube-system (label
	// k8s-app=kube-dns) and NodeLocal DNSCache's 169.254.20.10 on port 53,
	// and OpenShift's DNS pods (namespace openshift-dns) on port 5353. The
	// nameservers of dnsConfig are always added.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	DNSResolvers []networkingv1.NetworkPolicyPeer `json:"dnsResolvers,omitempty"`

	// deniedCIDRs are address ranges the VMs may not reach outside their own
	// cluster: the infra cluster's pod, service and node ranges. Empty means
	// the manager's --isolation-denied-cidrs (by default every private,
	// shared and link-local range).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	DeniedCIDRs []string `json:"deniedCIDRs,omitempty"`
}

// CustomNetworkPolicy is a NetworkPolicy an administrator adds for a tenant
// cluster. The provider keeps it in the infra namespace, named
// <KubevirtCluster>-<name>, and narrows its pod selector to the cluster's
// VMs so that it never selects another tenant's pods.
type CustomNetworkPolicy struct {
	// name tells the policy apart from the cluster's other policies.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// spec is the NetworkPolicy spec.
	// +required
	Spec networkingv1.NetworkPolicySpec `json:"spec"`
}

// MultusNetwork attaches a VM to a Multus NetworkAttachmentDefinition.
type MultusNetwork struct {
	// name of the VM network and interface.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// networkAttachmentDefinition is "namespace/name", or "name" in the VM's
	// namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	NetworkAttachmentDefinition string `json:"networkAttachmentDefinition"`

	// binding is bridge (the default) or sriov.
	// +optional
	// +kubebuilder:validation:Enum=bridge;sriov
	Binding string `json:"binding,omitempty"`

	// primary makes this the VM's default network: the VM gets no pod
	// network. At most one network may be primary.
	// +optional
	Primary bool `json:"primary,omitempty"`
}

// ClusterNetworkSpec lists the networks of every machine in a cluster.
type ClusterNetworkSpec struct {
	// networks are attached to every machine of the cluster, after the
	// networks of the machine's VM template; a machine's own network of the
	// same name wins.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Networks []MultusNetwork `json:"networks,omitempty"`

	// perCluster has the provider create a NetworkAttachmentDefinition for
	// this cluster from an administrator's template, for example a bridge
	// with its own VLAN per tenant cluster, and attach every machine to it.
	// +optional
	PerCluster *PerClusterNetwork `json:"perCluster,omitempty"`

	// nodeAddressNetwork is the default of the machines'
	// nodeAddressNetwork.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	NodeAddressNetwork string `json:"nodeAddressNetwork,omitempty"`
}

// PerClusterNetwork is a network created for one tenant cluster.
type PerClusterNetwork struct {
	// name of the VM network and interface; default "tenant".
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// templateRef names the NetworkAttachmentDefinition on the infra
	// cluster whose spec.config is the template: a Go text/template with
	// {{ .VLANID }}, {{ .ClusterName }} and {{ .Namespace }}.
	// +required
	TemplateRef NamespacedRef `json:"templateRef"`

	// vlanID is the VLAN of this cluster. Empty means one is allocated from
	// the range in the template's capkv.io/vlan-range annotation ("100-199"),
	// unique among the clusters using that template.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLANID *int32 `json:"vlanID,omitempty"`

	// binding is bridge (the default) or sriov.
	// +optional
	// +kubebuilder:validation:Enum=bridge;sriov
	Binding string `json:"binding,omitempty"`

	// primary makes it the VMs' default network: they get no pod network.
	// +optional
	Primary bool `json:"primary,omitempty"`
}

// NamespacedRef names an object in a namespace.
type NamespacedRef struct {
	// namespace of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClusterNetworkStatus reports the networks created for a cluster.
type ClusterNetworkStatus struct {
	// perCluster is the NetworkAttachmentDefinition created for the
	// cluster, as "namespace/name".
	// +optional
	// +kubebuilder:validation:MaxLength=317
	PerCluster string `json:"perCluster,omitempty"`
	// vlanID is the VLAN of the per-cluster network.
	// +optional
	VLANID int32 `json:"vlanID,omitempty"`
}

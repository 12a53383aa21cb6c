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

// NetworkAddressesSpec gives one VM network static addresses from Cluster
// API IPAM pools (docs/ipam.md): the provider claims one address from each
// pool before it creates the VM, and the guest configures them.
type NetworkAddressesSpec struct {
	// network names the VM network: one of the VM template, of the
	// machine's or the cluster's networks, or the per-cluster network. It
	// must not be the pod network, whose address KubeVirt hands out.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Network string `json:"network"`

	// addressesFromPools are the pools to take one address from each, for
	// example an InClusterIPPool in the machine's namespace or a
	// GlobalInClusterIPPool.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	AddressesFromPools []IPPoolReference `json:"addressesFromPools"`

	// gateway is the default route through this network. Empty means the
	// gateway of the first address that has one, else no default route
	// here (the pod network keeps it).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	Gateway string `json:"gateway,omitempty"`

	// nameservers the guest resolves with on this network.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=39
	Nameservers []string `json:"nameservers,omitempty"`
}

// IPPoolReference names an IP pool, as Cluster API's IPAddressClaim
// poolRef does: a pool in the machine's namespace, or a cluster-wide one.
type IPPoolReference struct {
	// apiGroup of the pool, such as ipam.cluster.x-k8s.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`

	// kind of the pool, such as InClusterIPPool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name of the pool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

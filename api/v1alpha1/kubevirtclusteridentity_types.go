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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubevirtClusterIdentityKind is the kind an identityRef names.
const KubevirtClusterIdentityKind = "KubevirtClusterIdentity"

// KubevirtClusterIdentitySpec is what an administrator lets the objects of
// some management namespaces make the provider do on an infra cluster.
type KubevirtClusterIdentitySpec struct {
	// secretRef names the Secret that holds the kubeconfig of an external
	// infra cluster under the key "kubeconfig" (and optionally the infra
	// namespace under "namespace"); its namespace defaults to the
	// provider's. Unset means the management cluster is the infra cluster.
	// +optional
	SecretRef *IdentitySecretReference `json:"secretRef,omitempty"`

	// allowedNamespaces says which management namespaces' objects may use
	// this identity. Unset allows none; {} allows every namespace.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`

	// infraNamespaces are the infra namespaces their VMs, Services and
	// volumes may go to, by name. Empty means the namespace the Secret's
	// "namespace" key names, else a namespace of the same name as the
	// object's own.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	InfraNamespaces []string `json:"infraNamespaces,omitempty"`

	// guest allows the VMs more than what belongs to their own cluster;
	// for a team the administrator trusts.
	// +optional
	Guest GuestAllowances `json:"guest,omitempty,omitzero"`
}

// IdentitySecretReference names a kubeconfig Secret an administrator
// keeps for tenants that may not read it.
type IdentitySecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Secret; empty is the provider's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	Namespace string `json:"namespace,omitempty"`
}

// AllowedNamespaces selects management namespaces: those listed by name and
// those whose labels match the selector.
type AllowedNamespaces struct {
	// list names namespaces. An empty list is refused: stored, it would
	// read as {}, which takes every namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	List []string `json:"list,omitempty"`
	// selector matches namespaces by their labels; an empty selector
	// matches every namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Volume sources a guest may be allowed beyond the default ones.
const (
	// GuestVolumeServiceAccount is KubeVirt's serviceAccount volume: the
	// token of an infra ServiceAccount, readable in the guest.
	GuestVolumeServiceAccount = "serviceAccount"
	// GuestVolumeHostDisk is a disk image file on the infra node.
	GuestVolumeHostDisk = "hostDisk"
	// GuestVolumeDownwardMetrics exposes infra node metrics to the guest.
	GuestVolumeDownwardMetrics = "downwardMetrics"
)

// GuestAllowances widen what a VM may mount, attach and be annotated with.
type GuestAllowances struct {
	// volumeSources are volume kinds refused by default that the VMs may
	// use: serviceAccount, hostDisk, downwardMetrics.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:Enum=serviceAccount;hostDisk;downwardMetrics
	VolumeSources []string `json:"volumeSources,omitempty"`
	// unlabelledObjects lets VMs mount Secrets, ConfigMaps, claims and
	// DataVolumes of their infra namespace that are not labelled with the
	// cluster's name (cluster.x-k8s.io/cluster-name).
	// +optional
	UnlabelledObjects bool `json:"unlabelledObjects,omitempty"`
	// networkNamespaces are the namespaces, besides the VM's own, whose
	// NetworkAttachmentDefinitions the VMs may attach.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	NetworkNamespaces []string `json:"networkNamespaces,omitempty"`
	// annotations are annotation keys, refused by default because KubeVirt,
	// Multus or a CNI act on them (a hook sidecar runs an image in the VM's
	// pod), that the VM and VM instance templates may carry.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=317
	Annotations []string `json:"annotations,omitempty"`
	// tenantCloud lets clusters ask for a tenant cloud credential in the
	// identity's infra namespaces although they count as shared: the
	// credential reaches every Service, VM and DataVolume of its namespace,
	// so set it only where each namespace serves one team.
	// +optional
	TenantCloud bool `json:"tenantCloud,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtclusteridentities,scope=Cluster,categories=cluster-api,shortName=kvci
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Secret",type="string",JSONPath=".spec.secretRef.name",description="The external infra cluster's kubeconfig Secret (empty: the management cluster)"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtClusterIdentity is an administrator's grant: which management
// namespaces may place clusters on which infra cluster and namespaces, and
// what their VMs may reach there (docs/multi-tenancy.md). KubevirtClusters
// and KubevirtMachines name it in identityRef.
type KubevirtClusterIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the grant.
	// +optional
	Spec KubevirtClusterIdentitySpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// KubevirtClusterIdentityList is a list of KubevirtClusterIdentities.
type KubevirtClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtClusterIdentity `json:"items"`
}

// IdentityReference names a KubevirtClusterIdentity.
type IdentityReference struct {
	// kind is KubevirtClusterIdentity.
	// +required
	// +kubebuilder:validation:Enum=KubevirtClusterIdentity
	Kind string `json:"kind"`
	// name of the identity.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtClusterIdentity{}, &KubevirtClusterIdentityList{})
}

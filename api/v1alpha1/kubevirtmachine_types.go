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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ProviderIDPrefix starts every providerID this provider sets. The KubeVirt
// cloud controller manager in tenant clusters uses the same scheme.
const ProviderIDPrefix = "kubevirt://"

// Bootstrap check strategies.
const (
	// CheckStrategyNone reports the machine bootstrapped as soon as its VM runs.
	CheckStrategyNone = "none"
	// CheckStrategySSH logs into the guest over SSH, verifying the host key the
	// provider injected, and looks for the bootstrap sentinel file. Kept for
	// manifests written for the community provider.
	CheckStrategySSH = "ssh"
	// CheckStrategyGuestAgent adds a VMI readiness probe, run by KubeVirt
	// through the guest agent, that checks the bootstrap sentinel file. It
	// needs no network path from the provider to the guest.
	CheckStrategyGuestAgent = "guest-agent"
)

// Cloud-init data sources a VM can read its cloud-config from.
const (
	// CloudInitNoCloud attaches user data as a NoCloud disk (the default).
	CloudInitNoCloud = "NoCloud"
	// CloudInitConfigDrive attaches user data as an OpenStack config drive.
	CloudInitConfigDrive = "ConfigDrive"
)

// KubevirtMachineSpec is the desired state of one tenant machine, a KubeVirt
// VirtualMachine on the infra cluster.
type KubevirtMachineSpec struct {
	// virtualMachineTemplate is the VirtualMachine to create, as KubeVirt's
	// own VirtualMachineSpec. It is honoured as written.
	// +optional
	VirtualMachineTemplate VirtualMachineTemplateSpec `json:"virtualMachineTemplate,omitempty,omitzero"`

	// providerID is the ID of the tenant Node of this machine, in the form
	// kubevirt://<vm name>. It is set by the provider and can be set only once.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID *string `json:"providerID,omitempty"`

	// virtualMachineBootstrapCheck selects how the provider tells that the
	// guest finished bootstrapping.
	// +optional
	BootstrapCheckSpec VirtualMachineBootstrapCheckSpec `json:"virtualMachineBootstrapCheck,omitempty,omitzero"`

	// infraClusterSecretRef references a Secret with the kubeconfig of an
	// external infra cluster for this machine, overriding the one of its
	// KubevirtCluster. Only kind Secret is allowed.
	// +optional
	InfraClusterSecretRef *corev1.ObjectReference `json:"infraClusterSecretRef,omitempty"`

	// identityRef names the KubevirtClusterIdentity this machine uses,
	// overriding its KubevirtCluster's (docs/multi-tenancy.md). It cannot be
	// combined with infraClusterSecretRef.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// rootDisk names the image the machine boots from. The provider adds it
	// as the VM's first disk, cloned from a golden volume imported once.
	// +optional
	RootDisk *RootDiskSpec `json:"rootDisk,omitempty"`

	// dataDisks are extra, empty disks.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DataDisks []DataDiskSpec `json:"dataDisks,omitempty"`

	// userData tunes how bootstrap data reaches the guest.
	// +optional
	UserData UserDataSpec `json:"userData,omitempty,omitzero"`

	// networks are Multus networks attached to this machine, besides the
	// cluster's (a network of the same name replaces the cluster's).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Networks []MultusNetwork `json:"networks,omitempty"`

	// nodeAddressNetwork names the VM network (spec.template.spec.networks)
	// whose addresses are listed first as the machine's InternalIP, for
	// Multus layouts where the node address is not on the pod network. Empty
	// means the cluster's network.nodeAddressNetwork, else the pod network,
	// else the first network.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeAddressNetwork string `json:"nodeAddressNetwork,omitempty"`

	// networkAddresses gives VM networks static addresses from Cluster API
	// IPAM pools; the guest gets them through its network configuration
	// (docs/ipam.md).
	// +optional
	// +listType=map
	// +listMapKey=network
	// +kubebuilder:validation:MaxItems=8
	NetworkAddresses []NetworkAddressesSpec `json:"networkAddresses,omitempty"`

	// placement spreads and places the VM over the infra nodes: affinity
	// presets and the topology spread constraint (docs/placement.md).
	// +optional
	Placement PlacementSpec `json:"placement,omitempty,omitzero"`

	// preset applies a performance or density sizing preset to the VM
	// (docs/placement.md).
	// +optional
	Preset *PresetSpec `json:"preset,omitempty"`

	// evacuation says what the provider does when an infra node drain
	// asks a VM with the External eviction strategy to leave.
	// +optional
	Evacuation EvacuationSpec `json:"evacuation,omitempty,omitzero"`
}

// UserDataSpec tunes bootstrap data delivery.
type UserDataSpec struct {
	// cloudInitDataSource is how cloud-config bootstrap data is attached:
	// NoCloud (default) or ConfigDrive. Ignition is always attached as a
	// config drive, which Flatcar and Fedora CoreOS read on KubeVirt.
	// +optional
	// +kubebuilder:validation:Enum=NoCloud;ConfigDrive
	CloudInitDataSource string `json:"cloudInitDataSource,omitempty"`

	// networkDataSecretRef names a Secret in the machine's namespace whose
	// key "networkdata" (or "networkData") is cloud-init network
	// configuration for static addressing: network config v1/v2 for NoCloud,
	// OpenStack network_data.json for ConfigDrive. It is copied unchanged.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
}

// VirtualMachineTemplateSpec is the metadata and spec of the VirtualMachine.
type VirtualMachineTemplateSpec struct {
	// metadata holds labels and annotations for the VirtualMachine.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is KubeVirt's VirtualMachineSpec.
	// +optional
	Spec kubevirtv1.VirtualMachineSpec `json:"spec,omitempty"`
}

// VirtualMachineBootstrapCheckSpec selects the bootstrap check.
type VirtualMachineBootstrapCheckSpec struct {
	// checkStrategy is how bootstrap completion is checked: "none" trusts a
	// running, ready VM; "guest-agent" has KubeVirt's guest agent check the
	// bootstrap sentinel file through a readiness probe; "ssh" logs in with a
	// provider-generated key and a verified host key (for manifests written
	// for the community provider).
	// +optional
	// +kubebuilder:validation:Enum=none;ssh;guest-agent
	CheckStrategy string `json:"checkStrategy,omitempty"`
}

// KubevirtMachineStatus is the observed state of a KubevirtMachine.
type KubevirtMachineStatus struct {
	// ready is true when the machine infrastructure is provisioned. It mirrors
	// initialization.provisioned for clients of the v1beta1 contract.
	// +optional
	Ready bool `json:"ready"`

	// initialization reports when the machine infrastructure was provisioned.
	// +optional
	Initialization KubevirtMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses are the addresses of the machine.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain is the failure domain the machine was placed in.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// goldenImage is the golden volume the machine's root disk is cloned
	// from; it keeps the volume in use.
	// +optional
	GoldenImage *GoldenImageStatus `json:"goldenImage,omitempty"`

	// infraNodeName is the infra node the VM instance runs on, as last
	// copied to the tenant Node's placement labels.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	InfraNodeName string `json:"infraNodeName,omitempty"`

	// nodeupdated is true once the tenant Node carries this machine's
	// providerID.
	// +optional
	NodeUpdated bool `json:"nodeupdated,omitempty"`

	// evacuation is the evacuation in progress, if any.
	// +optional
	Evacuation *EvacuationStatus `json:"evacuation,omitempty"`

	// lastRestartRequest is the value of the capkv.io/restart-requested-at
	// annotation last acted on.
	// +optional
	LastRestartRequest string `json:"lastRestartRequest,omitempty"`

	// conditions report the state of the KubevirtMachine; Ready summarizes
	// them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KubevirtMachineInitializationStatus follows the Cluster API v1beta2
// contract.
// +kubebuilder:validation:MinProperties=1
type KubevirtMachineInitializationStatus struct {
	// provisioned is true when the virtual machine runs and is ready.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtmachines,scope=Namespaced,categories=cluster-api,shortName=kvm
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this KubevirtMachine belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Whether the machine infrastructure is ready"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='VirtualMachineReady')].reason",description="Where the VM stands, or what it waits for"
// +kubebuilder:printcolumn:name="VM",type="string",JSONPath=".spec.providerID",description="The VirtualMachine, as a providerID"
// +kubebuilder:printcolumn:name="Infra Node",type="string",JSONPath=".status.infraNodeName",description="The infra node the VM runs on"
// +kubebuilder:printcolumn:name="IP",type="string",JSONPath=".status.addresses[?(@.type=='InternalIP')].address",description="Internal IP addresses"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.conditions[?(@.type=='NodeJoined')].reason",description="Whether the tenant Node joined",priority=1
// +kubebuilder:printcolumn:name="Bootstrap",type="string",JSONPath=".status.conditions[?(@.type=='BootstrapSucceeded')].reason",description="The bootstrap check",priority=1
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".status.failureDomain",description="The failure domain",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtMachine is one tenant machine: a KubeVirt VirtualMachine on the
// infra cluster.
type KubevirtMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec KubevirtMachineSpec `json:"spec,omitempty"`
	// status is the observed state.
	// +optional
	Status KubevirtMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions, for CAPI's condition utilities.
func (m *KubevirtMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions, for CAPI's condition utilities.
func (m *KubevirtMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubevirtMachineList is a list of KubevirtMachines.
type KubevirtMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtMachine{}, &KubevirtMachineList{})
}

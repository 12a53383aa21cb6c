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
)

// KubevirtMachinePoolSpec is the desired state of a KubevirtMachinePool: the
// machine every instance of the pool is made from. Unlike a
// KubevirtMachineTemplate it may change; the provider then rolls the
// instances (docs/machinepools.md).
type KubevirtMachinePoolSpec struct {
	// template is the KubevirtMachine each instance of the pool gets: its
	// metadata is added to the instance's KubevirtMachine, its spec builds the
	// VirtualMachinePool's VM template.
	Template KubevirtMachineTemplateResource `json:"template"`

	// providerIDList are the providerIDs of the pool's instances, set by the
	// provider.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`
}

// KubevirtMachinePoolStatus is the observed state of a KubevirtMachinePool.
type KubevirtMachinePoolStatus struct {
	// ready is true once the VirtualMachinePool exists. It mirrors
	// initialization.provisioned for the Cluster API MachinePool controller,
	// which reads this field.
	// +optional
	Ready bool `json:"ready"`

	// initialization reports when the pool's infrastructure was provisioned.
	// +optional
	Initialization KubevirtMachinePoolInitializationStatus `json:"initialization,omitempty,omitzero"`

	// replicas is the number of instances of the pool: its VirtualMachines.
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of instances whose VM runs and is ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// infrastructureMachineKind is KubevirtMachine: each instance has one,
	// and Cluster API gives each a Machine (MachinePool Machines).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`

	// virtualMachinePool names the VirtualMachinePool on the infra cluster,
	// as namespace/name.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	VirtualMachinePool string `json:"virtualMachinePool,omitempty"`

	// goldenImage is the golden volume the pool's instances clone their root
	// disk from; the pool keeps it in use.
	// +optional
	GoldenImage *GoldenImageStatus `json:"goldenImage,omitempty"`

	// capacity is the resources of one instance of the pool, which the
	// cluster autoscaler reads to scale a MachinePool up from zero: vCPUs,
	// memory, GPUs and host devices (docs/machinepools.md#autoscaling).
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo is the architecture and operating system of the instances.
	// +optional
	NodeInfo NodeInfo `json:"nodeInfo,omitempty,omitzero"`

	// conditions report the state of the pool; Ready summarizes them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KubevirtMachinePoolInitializationStatus follows the Cluster API v1beta2
// contract.
// +kubebuilder:validation:MinProperties=1
type KubevirtMachinePoolInitializationStatus struct {
	// provisioned is true once the VirtualMachinePool exists on the infra
	// cluster.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtmachinepools,scope=Namespaced,categories=cluster-api,shortName=kvmp
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this pool belongs to"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Instances of the pool"
// +kubebuilder:printcolumn:name="Ready Replicas",type="integer",JSONPath=".status.readyReplicas",description="Instances whose VM is ready"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Whether the pool is ready"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='VirtualMachinePoolReady')].reason",description="Where the pool stands, or what it waits for"
// +kubebuilder:printcolumn:name="VM Pool",type="string",JSONPath=".status.virtualMachinePool",description="The VirtualMachinePool on the infra cluster",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtMachinePool is the infrastructure of a Cluster API MachinePool: a
// KubeVirt VirtualMachinePool on the infra cluster.
type KubevirtMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	Spec KubevirtMachinePoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status KubevirtMachinePoolStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// KubevirtMachinePoolList is a list of KubevirtMachinePools.
type KubevirtMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtMachinePool `json:"items"`
}

// GetConditions returns the conditions, for CAPI's condition utilities.
func (p *KubevirtMachinePool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the conditions, for CAPI's condition utilities.
func (p *KubevirtMachinePool) SetConditions(conditions []metav1.Condition) {
	p.Status.Conditions = conditions
}

func init() {
	objectTypes = append(objectTypes, &KubevirtMachinePool{}, &KubevirtMachinePoolList{})
}

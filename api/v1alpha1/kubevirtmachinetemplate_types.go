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
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// KubevirtMachineTemplateSpec holds the template KubevirtMachines are made
// from, by MachineDeployments, MachineSets and KubeadmControlPlane.
type KubevirtMachineTemplateSpec struct {
	// template is the KubevirtMachine to create.
	Template KubevirtMachineTemplateResource `json:"template"`
}

// KubevirtMachineTemplateResource is the metadata and spec of a
// KubevirtMachine made from a template.
type KubevirtMachineTemplateResource struct {
	// metadata holds labels and annotations added to the KubevirtMachine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec is the spec of the KubevirtMachine.
	Spec KubevirtMachineSpec `json:"spec"`
}

// KubevirtMachineTemplateStatus tells the cluster autoscaler what a machine of
// this template offers, for scaling from zero.
type KubevirtMachineTemplateStatus struct {
	// capacity is the resources of one machine of this template.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo is the architecture and operating system of the machines.
	// +optional
	NodeInfo NodeInfo `json:"nodeInfo,omitempty,omitzero"`

	// goldenImage is the golden volume machines of this template clone
	// their root disk from; the template keeps it in use, so scaling up
	// does not download the image again.
	// +optional
	GoldenImage *GoldenImageStatus `json:"goldenImage,omitempty"`

	// conditions report whether the capacity is known.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Architecture is a CPU architecture of a node.
// +kubebuilder:validation:Enum=amd64;arm64;s390x;ppc64le
type Architecture string

// Architectures KubeVirt runs guests on.
const (
	ArchitectureAmd64   Architecture = "amd64"
	ArchitectureArm64   Architecture = "arm64"
	ArchitectureS390x   Architecture = "s390x"
	ArchitecturePpc64le Architecture = "ppc64le"
)

// NodeInfo is the architecture and operating system of a node.
// +kubebuilder:validation:MinProperties=1
type NodeInfo struct {
	// architecture is the CPU architecture of the node.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`
	// operatingSystem is the operating system of the node, such as linux.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtmachinetemplates,scope=Namespaced,categories=cluster-api,shortName=kvmt
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.capacity.cpu",description="vCPUs of a machine, for the autoscaler"
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.capacity.memory",description="Memory of a machine, for the autoscaler"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".status.conditions[?(@.type=='CapacityKnown')].reason",description="Where the capacity comes from"
// +kubebuilder:printcolumn:name="Golden Image",type="string",JSONPath=".status.goldenImage.name",description="The golden volume the template's machines clone"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtMachineTemplate is a template for KubevirtMachines. Its spec is
// immutable: roll out a change by creating a new template.
type KubevirtMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec KubevirtMachineTemplateSpec `json:"spec"`
	// status tells the autoscaler the capacity of a machine.
	// +optional
	Status KubevirtMachineTemplateStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// KubevirtMachineTemplateList is a list of KubevirtMachineTemplates.
type KubevirtMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtMachineTemplate `json:"items"`
}

// GetConditions returns the conditions, for CAPI's condition utilities.
func (t *KubevirtMachineTemplate) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions sets the conditions, for CAPI's condition utilities.
func (t *KubevirtMachineTemplate) SetConditions(conditions []metav1.Condition) {
	t.Status.Conditions = conditions
}

func init() {
	objectTypes = append(objectTypes, &KubevirtMachineTemplate{}, &KubevirtMachineTemplateList{})
}

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

// Package worldinfra describes a trivial infrastructure provider of the test
// world, used to prove the Cluster API side of the world works on its own:
// its clusters get an in-memory API endpoint, its machines join at once.
//
// +groupName=infrastructure.world.capkv.io
// +versionName=v1alpha1
package worldinfra

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Endpoint is a control-plane endpoint.
type Endpoint struct {
	// +optional
	Host string `json:"host,omitempty"`
	// +optional
	Port int32 `json:"port,omitempty"`
}

// Initialization follows the Cluster API v1beta2 contract.
type Initialization struct {
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// WorldCluster is the infrastructure of a test cluster.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=worldclusters,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type WorldCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorldClusterSpec   `json:"spec,omitempty"`
	Status            WorldClusterStatus `json:"status,omitempty"`
}

// WorldClusterSpec is the desired state.
type WorldClusterSpec struct {
	// +optional
	ControlPlaneEndpoint Endpoint `json:"controlPlaneEndpoint,omitempty"`
}

// WorldClusterStatus is the observed state.
type WorldClusterStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
}

// WorldMachine is a test machine.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=worldmachines,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type WorldMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorldMachineSpec   `json:"spec,omitempty"`
	Status            WorldMachineStatus `json:"status,omitempty"`
}

// WorldMachineSpec is the desired state.
type WorldMachineSpec struct {
	// +optional
	ProviderID string `json:"providerID,omitempty"`
}

// WorldMachineStatus is the observed state.
type WorldMachineStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
}

// WorldMachineTemplate is a template of test machines.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=worldmachinetemplates,scope=Namespaced
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type WorldMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorldMachineTemplateSpec `json:"spec"`
}

// WorldMachineTemplateSpec holds the template.
type WorldMachineTemplateSpec struct {
	Template WorldMachineTemplateResource `json:"template"`
}

// WorldMachineTemplateResource is the templated machine.
type WorldMachineTemplateResource struct {
	// +optional
	Spec WorldMachineSpec `json:"spec,omitempty"`
}

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
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// KubevirtMachinePoolTemplateSpec holds the template a ClusterClass makes
// KubevirtMachinePools from.
type KubevirtMachinePoolTemplateSpec struct {
	// template is the KubevirtMachinePool to create.
	Template KubevirtMachinePoolTemplateResource `json:"template"`
}

// KubevirtMachinePoolTemplateResource is the metadata and spec of a
// KubevirtMachinePool made from a template.
type KubevirtMachinePoolTemplateResource struct {
	// metadata holds labels and annotations added to the KubevirtMachinePool.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec is the spec of the KubevirtMachinePool.
	Spec KubevirtMachinePoolSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtmachinepooltemplates,scope=Namespaced,categories=cluster-api,shortName=kvmpt
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtMachinePoolTemplate is a template for KubevirtMachinePools, for
// the machinePools of a ClusterClass. Its spec is immutable: roll out a
// change by creating a new template.
type KubevirtMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec KubevirtMachinePoolTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// KubevirtMachinePoolTemplateList is a list of KubevirtMachinePoolTemplates.
type KubevirtMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtMachinePoolTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtMachinePoolTemplate{}, &KubevirtMachinePoolTemplateList{})
}

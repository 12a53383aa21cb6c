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

// KubevirtClusterTemplateSpec holds the template KubevirtClusters are made
// from by ClusterClass.
type KubevirtClusterTemplateSpec struct {
	// template is the KubevirtCluster to create.
	Template KubevirtClusterTemplateResource `json:"template"`
}

// KubevirtClusterTemplateResource is the metadata and spec of a
// KubevirtCluster made from a template.
type KubevirtClusterTemplateResource struct {
	// metadata holds labels and annotations added to the KubevirtCluster.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec is the spec of the KubevirtCluster.
	Spec KubevirtClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtclustertemplates,scope=Namespaced,categories=cluster-api,shortName=kvct
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Isolation",type="string",JSONPath=".spec.template.spec.isolation.mode",description="The isolation mode of its clusters (empty: the default, on)"
// +kubebuilder:printcolumn:name="Endpoint Type",type="string",JSONPath=".spec.template.spec.controlPlaneServiceTemplate.spec.type",description="The Service type of its clusters' control-plane endpoint"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtClusterTemplate is a template for KubevirtClusters, used by
// ClusterClass. Its spec is immutable.
type KubevirtClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec KubevirtClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// KubevirtClusterTemplateList is a list of KubevirtClusterTemplates.
type KubevirtClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtClusterTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtClusterTemplate{}, &KubevirtClusterTemplateList{})
}

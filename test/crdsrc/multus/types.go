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

// Package multus describes k8s.cni.cncf.io/v1 NetworkAttachmentDefinition for
// CRD generation, as the Multus project defines it.
//
// +groupName=k8s.cni.cncf.io
// +versionName=v1
package multus

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NetworkAttachmentDefinition is a Multus secondary network.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=network-attachment-definitions,scope=Namespaced,shortName=net-attach-def,singular=network-attachment-definition
// +kubebuilder:storageversion
type NetworkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NetworkAttachmentDefinitionSpec `json:"spec,omitempty"`
}

// NetworkAttachmentDefinitionSpec holds the CNI configuration.
type NetworkAttachmentDefinitionSpec struct {
	// config is the CNI configuration as a JSON document.
	// +optional
	Config string `json:"config,omitempty"`
}

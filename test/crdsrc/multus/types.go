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

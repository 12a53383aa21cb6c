// Package instancetype wraps instancetype.kubevirt.io/v1beta1 types for CRD
// generation.
//
// +groupName=instancetype.kubevirt.io
// +versionName=v1beta1
package instancetype

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

// VirtualMachineInstancetype wraps the namespaced instance type.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstancetypes,scope=Namespaced,shortName=vminstancetype;vminstancetypes;vmf;vmfs
// +kubebuilder:storageversion
type VirtualMachineInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              instancetypev1beta1.VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineClusterInstancetype wraps the cluster-wide instance type.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterinstancetypes,scope=Cluster,shortName=vmclusterinstancetype;vmclusterinstancetypes;vmcf;vmcfs
// +kubebuilder:storageversion
type VirtualMachineClusterInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              instancetypev1beta1.VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachinePreference wraps the namespaced preference.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachinepreferences,scope=Namespaced,shortName=vmpref;vmprefs;vmp;vmps
// +kubebuilder:storageversion
type VirtualMachinePreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              instancetypev1beta1.VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachineClusterPreference wraps the cluster-wide preference.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterpreferences,scope=Cluster,shortName=vmcp;vmcps
// +kubebuilder:storageversion
type VirtualMachineClusterPreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              instancetypev1beta1.VirtualMachinePreferenceSpec `json:"spec"`
}

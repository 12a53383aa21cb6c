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

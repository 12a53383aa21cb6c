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

// Package kubevirt wraps kubevirt.io/v1 types for CRD generation.
//
// +groupName=kubevirt.io
// +versionName=v1
package kubevirt

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VirtualMachine wraps kubevirtv1.VirtualMachine.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachines,scope=Namespaced,shortName=vm;vms,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              kubevirtv1.VirtualMachineSpec   `json:"spec"`
	Status            kubevirtv1.VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineInstance wraps kubevirtv1.VirtualMachineInstance.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstances,scope=Namespaced,shortName=vmi;vmis,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type VirtualMachineInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              kubevirtv1.VirtualMachineInstanceSpec   `json:"spec"`
	Status            kubevirtv1.VirtualMachineInstanceStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceMigration wraps kubevirtv1.VirtualMachineInstanceMigration.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstancemigrations,scope=Namespaced,shortName=vmim;vmims,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type VirtualMachineInstanceMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              kubevirtv1.VirtualMachineInstanceMigrationSpec   `json:"spec"`
	Status            kubevirtv1.VirtualMachineInstanceMigrationStatus `json:"status,omitempty"`
}

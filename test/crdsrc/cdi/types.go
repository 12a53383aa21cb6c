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

// Package cdi wraps cdi.kubevirt.io/v1beta1 types for CRD generation.
//
// +groupName=cdi.kubevirt.io
// +versionName=v1beta1
package cdi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// DataVolume wraps cdiv1.DataVolume.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=datavolumes,scope=Namespaced,shortName=dv;dvs,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type DataVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.DataVolumeSpec   `json:"spec"`
	Status            cdiv1.DataVolumeStatus `json:"status,omitempty"`
}

// DataSource wraps cdiv1.DataSource.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=datasources,scope=Namespaced,shortName=das,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type DataSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.DataSourceSpec   `json:"spec"`
	Status            cdiv1.DataSourceStatus `json:"status,omitempty"`
}

// DataImportCron wraps cdiv1.DataImportCron.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dataimportcrons,scope=Namespaced,shortName=dic;dics,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type DataImportCron struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.DataImportCronSpec   `json:"spec"`
	Status            cdiv1.DataImportCronStatus `json:"status,omitempty"`
}

// StorageProfile wraps cdiv1.StorageProfile.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=storageprofiles,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type StorageProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.StorageProfileSpec   `json:"spec"`
	Status            cdiv1.StorageProfileStatus `json:"status,omitempty"`
}

// CDI wraps cdiv1.CDI, whose spec carries cloneStrategyOverride.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=cdis,scope=Cluster,shortName=cdi;cdis
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type CDI struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.CDISpec   `json:"spec"`
	Status            cdiv1.CDIStatus `json:"status,omitempty"`
}

// CDIConfig wraps cdiv1.CDIConfig; virt-controller waits for its informer
// to sync before it runs any VMI, so the CRD must exist.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=cdiconfigs,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type CDIConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              cdiv1.CDIConfigSpec   `json:"spec"`
	Status            cdiv1.CDIConfigStatus `json:"status,omitempty"`
}

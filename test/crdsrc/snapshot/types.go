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

// Package snapshot describes snapshot.storage.k8s.io/v1 VolumeSnapshotClass
// for CRD generation; CDI looks for one to decide on snapshot clones.
//
// +groupName=snapshot.storage.k8s.io
// +versionName=v1
package snapshot

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VolumeSnapshotClass names the CSI driver that takes snapshots.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=volumesnapshotclasses,scope=Cluster,shortName=vsclass;vsclasses
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes-csi/external-snapshotter/pull/814"
// +kubebuilder:storageversion
type VolumeSnapshotClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// driver is the CSI driver.
	Driver string `json:"driver"`
	// deletionPolicy is Delete or Retain.
	DeletionPolicy string `json:"deletionPolicy"`
}

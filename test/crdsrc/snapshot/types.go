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

// Package snapshot describes the snapshot.storage.k8s.io/v1 kinds for CRD
// generation, at the version of the API CDI v1.64.0 builds against
// (external-snapshotter client v6.0.1): CDI looks for a VolumeSnapshotClass
// to decide on snapshot clones, and the simulated snapshotter takes the
// VolumeSnapshots CDI makes.
//
// +groupName=snapshot.storage.k8s.io
// +versionName=v1
package snapshot

import (
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeSnapshot wraps snapshotv1.VolumeSnapshot, with the rules the
// upstream CRD states in CEL: exactly one source, which never changes.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=volumesnapshots,scope=Namespaced,shortName=vs
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes-csi/external-snapshotter/pull/814"
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="has(self.spec.source.persistentVolumeClaimName) != has(self.spec.source.volumeSnapshotContentName)",message="exactly one of spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName must be set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || self.spec.source == oldSelf.spec.source",message="spec.source is immutable"
type VolumeSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              snapshotv1.VolumeSnapshotSpec    `json:"spec"`
	Status            *snapshotv1.VolumeSnapshotStatus `json:"status,omitempty"`
}

// VolumeSnapshotContent wraps snapshotv1.VolumeSnapshotContent.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=volumesnapshotcontents,scope=Cluster,shortName=vsc;vscs
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes-csi/external-snapshotter/pull/814"
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="has(self.spec.source.volumeHandle) != has(self.spec.source.snapshotHandle)",message="exactly one of spec.source.volumeHandle and spec.source.snapshotHandle must be set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || self.spec.source == oldSelf.spec.source",message="spec.source is immutable"
type VolumeSnapshotContent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              snapshotv1.VolumeSnapshotContentSpec    `json:"spec"`
	Status            *snapshotv1.VolumeSnapshotContentStatus `json:"status,omitempty"`
}

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
	// parameters are the driver's own.
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
	// deletionPolicy is Delete or Retain.
	DeletionPolicy snapshotv1.DeletionPolicy `json:"deletionPolicy"`
}

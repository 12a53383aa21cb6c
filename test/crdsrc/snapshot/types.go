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
// generation, with the fields of the API as CDI v1.64.0 builds against it
// (external-snapshotter client v6.0.1): CDI looks for a VolumeSnapshotClass
// to decide on snapshot clones, and the simulated snapshotter takes the
// VolumeSnapshots CDI makes. The types are written here rather than
// wrapping external-snapshotter's: controller-gen then also emits that
// package's own root types, in an order that changes from run to run.
//
// +groupName=snapshot.storage.k8s.io
// +versionName=v1
package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletionPolicy says whether a snapshot's content goes with it.
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

// SnapshotError is why a snapshot could not be taken (yet).
type SnapshotError struct {
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	Message *string `json:"message,omitempty"`
}

// VolumeSnapshot asks for a snapshot of a claim, or binds an existing one,
// with the rules the upstream CRD states in CEL: exactly one source, which
// never changes.
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
	Spec              VolumeSnapshotSpec `json:"spec"`
	// +optional
	Status *VolumeSnapshotStatus `json:"status,omitempty"`
}

// VolumeSnapshotSpec is what to snapshot, and with which class.
type VolumeSnapshotSpec struct {
	Source VolumeSnapshotSource `json:"source"`
	// +optional
	VolumeSnapshotClassName *string `json:"volumeSnapshotClassName,omitempty"`
}

// VolumeSnapshotSource is a claim to snapshot or an existing content.
type VolumeSnapshotSource struct {
	// +optional
	PersistentVolumeClaimName *string `json:"persistentVolumeClaimName,omitempty"`
	// +optional
	VolumeSnapshotContentName *string `json:"volumeSnapshotContentName,omitempty"`
}

// VolumeSnapshotStatus is what the snapshot controller reports.
type VolumeSnapshotStatus struct {
	// +optional
	BoundVolumeSnapshotContentName *string `json:"boundVolumeSnapshotContentName,omitempty"`
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// +optional
	RestoreSize *resource.Quantity `json:"restoreSize,omitempty"`
	// +optional
	Error *SnapshotError `json:"error,omitempty"`
}

// VolumeSnapshotContent is a snapshot on the storage, bound to one
// VolumeSnapshot.
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
	Spec              VolumeSnapshotContentSpec `json:"spec"`
	// +optional
	Status *VolumeSnapshotContentStatus `json:"status,omitempty"`
}

// VolumeSnapshotContentSpec binds the content to its snapshot and names
// the volume or the storage's snapshot it stands for.
type VolumeSnapshotContentSpec struct {
	VolumeSnapshotRef corev1.ObjectReference `json:"volumeSnapshotRef"`
	DeletionPolicy    DeletionPolicy         `json:"deletionPolicy"`
	Driver            string                 `json:"driver"`
	// +optional
	VolumeSnapshotClassName *string                     `json:"volumeSnapshotClassName,omitempty"`
	Source                  VolumeSnapshotContentSource `json:"source"`
	// +optional
	SourceVolumeMode *corev1.PersistentVolumeMode `json:"sourceVolumeMode,omitempty"`
}

// VolumeSnapshotContentSource is the volume to snapshot, or the storage's
// snapshot.
type VolumeSnapshotContentSource struct {
	// +optional
	VolumeHandle *string `json:"volumeHandle,omitempty"`
	// +optional
	SnapshotHandle *string `json:"snapshotHandle,omitempty"`
}

// VolumeSnapshotContentStatus is what the CSI driver's sidecar reports.
type VolumeSnapshotContentStatus struct {
	// +optional
	SnapshotHandle *string `json:"snapshotHandle,omitempty"`
	// +optional
	CreationTime *int64 `json:"creationTime,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	RestoreSize *int64 `json:"restoreSize,omitempty"`
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// +optional
	Error *SnapshotError `json:"error,omitempty"`
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
	DeletionPolicy DeletionPolicy `json:"deletionPolicy"`
}

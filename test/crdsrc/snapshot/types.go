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

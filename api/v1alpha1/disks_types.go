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

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Clone strategies of a root disk.
const (
	// CloneStrategyGolden imports the image once per infra namespace and
	// storage class into a golden volume, and clones it for every VM.
	CloneStrategyGolden = "Golden"
	// CloneStrategyPerVMImport imports the image for every VM, for storage
	// where a clone is slower than a download.
	CloneStrategyPerVMImport = "PerVMImport"
)

// RootDiskSpec names the image a machine boots from and the disk it gets.
type RootDiskSpec struct {
	// image is where the operating system image comes from.
	// +required
	Image ImageSource `json:"image"`

	// diskSize is the size of the machine's root disk. It must be at least
	// the image's virtual size.
	// +required
	DiskSize resource.Quantity `json:"diskSize"`

	// imageSize is the size of the golden volume the image is imported into;
	// empty means diskSize. Machines sharing the image need a diskSize of at
	// least this.
	// +optional
	ImageSize *resource.Quantity `json:"imageSize,omitempty"`

	// storageClassName is the storage class of the root disk and its golden
	// volume; empty means the infra cluster's default class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// accessModes of the root disk; empty lets CDI take them from the
	// storage class's StorageProfile.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// volumeMode of the root disk and its golden volume; empty lets CDI take
	// it from the StorageProfile.
	// +optional
	// +kubebuilder:validation:Enum=Filesystem;Block
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`

	// cloneStrategy is Golden (the default: import once, clone per VM) or
	// PerVMImport (import for every VM). PVC and DataSource images are
	// always cloned.
	// +optional
	// +kubebuilder:validation:Enum=Golden;PerVMImport
	CloneStrategy string `json:"cloneStrategy,omitempty"`
}

// ImageSource is exactly one source of an operating system image.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type ImageSource struct {
	// http downloads the image from an HTTP(S) URL.
	// +optional
	HTTP *HTTPImageSource `json:"http,omitempty"`
	// registry pulls a container disk image from a registry.
	// +optional
	Registry *RegistryImageSource `json:"registry,omitempty"`
	// pvc clones an existing, admin-provided PVC; it is never deleted.
	// +optional
	PVC *ImageVolumeRef `json:"pvc,omitempty"`
	// dataSource clones what a CDI DataSource points at (a DataImportCron
	// keeps one fresh); it is never deleted.
	// +optional
	DataSource *ImageVolumeRef `json:"dataSource,omitempty"`
}

// HTTPImageSource is an image on an HTTP(S) server.
type HTTPImageSource struct {
	// url of the image (qcow2, raw, optionally gz or xz compressed).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// secretRef names a Secret in the infra namespace with keys accessKeyId
	// and secretKey for basic authentication, as CDI expects.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretRef string `json:"secretRef,omitempty"`
	// certConfigMap names a ConfigMap in the infra namespace with the CA
	// bundle of the server.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CertConfigMap string `json:"certConfigMap,omitempty"`
}

// RegistryImageSource is a container disk image in a registry.
type RegistryImageSource struct {
	// url of the image, docker://registry/repository:tag.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// secretRef names a Secret in the infra namespace with registry
	// credentials (accessKeyId and secretKey).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretRef string `json:"secretRef,omitempty"`
	// certConfigMap names a ConfigMap in the infra namespace with the CA
	// bundle of the registry.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CertConfigMap string `json:"certConfigMap,omitempty"`
}

// ImageVolumeRef names a PVC or DataSource on the infra cluster.
type ImageVolumeRef struct {
	// namespace of the object; empty means the VM's namespace. Cloning from
	// another namespace needs RBAC for the VM's service account there.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// DataDiskSpec is an extra, empty disk of a machine.
type DataDiskSpec struct {
	// name of the disk, unique among the VM's disks.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// diskSize is the size of the disk.
	// +required
	DiskSize resource.Quantity `json:"diskSize"`
	// storageClassName of the disk; empty means the default class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
	// accessModes of the disk; empty lets CDI take them from the
	// StorageProfile.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// volumeMode of the disk; empty lets CDI take it from the
	// StorageProfile.
	// +optional
	// +kubebuilder:validation:Enum=Filesystem;Block
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// hotpluggable attaches the disk as a hotplug volume, which KubeVirt can
	// detach from a running VM (needs KubeVirt's HotplugVolumes feature).
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// GoldenImageStatus names the golden volume a machine or template uses.
type GoldenImageStatus struct {
	// infraCluster is empty for the management cluster, else the
	// namespace/name of the kubeconfig Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	InfraCluster string `json:"infraCluster,omitempty"`
	// namespace of the golden DataVolume on the infra cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the golden DataVolume.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

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

// Package goldenplan plans golden volumes: one DataVolume per image source,
// storage class, volume mode and infra namespace, imported once and cloned
// for every VM's root disk. It is pure: specs in, objects out;
// pkg/golden/goldenkeeper keeps the volumes on the infra cluster.
package goldenplan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Labels and annotations of golden volumes.
const (
	// Label marks a DataVolume as a golden volume made by the provider.
	Label = "capkv.io/golden-image"
	// SourceAnnotation says, for people, what image a golden volume holds.
	SourceAnnotation = "capkv.io/golden-image-source"
	// UnusedSinceAnnotation records when the last user went away; the
	// volume is deleted a retention period later.
	UnusedSinceAnnotation = "capkv.io/unused-since"
	// immediateBinding makes CDI bind and import a volume on a
	// WaitForFirstConsumer class, which no VM would otherwise consume
	// (docs/kubevirt-behaviour.md#waitforfirstconsumer-storage).
	immediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"
	// keepAfterCompletion stops CDI versions that garbage-collect completed
	// DataVolumes (docs/kubevirt-behaviour.md#garbage-collection-of-completed-datavolumes) from removing the golden DataVolume and
	// leaving its PVC behind, unmanaged.
	keepAfterCompletion = "cdi.kubevirt.io/storage.deleteAfterCompletion"
	// namePrefix starts the names of golden volumes.
	namePrefix = "capkv-golden-"
)

// RootDiskName is the name of the root disk and its DataVolume template
// (prefixed with the VM name by the VM builder).
const RootDiskName = "rootdisk"

// Needed reports whether a root disk is made from a golden volume: an HTTP
// or registry image without PerVMImport.
func Needed(rd *infrav1.RootDiskSpec) bool {
	return rd != nil && (rd.Image.HTTP != nil || rd.Image.Registry != nil) && rd.CloneStrategy != infrav1.CloneStrategyPerVMImport
}

// ClassBlueprint reports whether a template with these owners belongs to
// a ClusterClass. Cluster API copies such a template, patched, for each
// cluster and never makes a machine from it, so it keeps no golden volume
// in use: its image before the class's patches (the class's default
// version, say) may be one no cluster runs any more.
func ClassBlueprint(owners []metav1.OwnerReference) bool {
	return util.HasOwner(owners, clusterv1.GroupVersion.String(), []string{"ClusterClass"})
}

// key is what identifies a golden volume besides its namespace.
type key struct {
	HTTP         *infrav1.HTTPImageSource            `json:"http,omitempty"`
	Registry     *infrav1.RegistryImageSource        `json:"registry,omitempty"`
	StorageClass string                              `json:"storageClass,omitempty"`
	VolumeMode   string                              `json:"volumeMode,omitempty"`
	AccessModes  []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// Name is the name of the golden volume of a root disk in an infra
// namespace: the same for every machine naming the same image there.
func Name(rd *infrav1.RootDiskSpec) string {
	// Access modes are part of the key because on a class whose
	// StorageProfile has none, the golden volume needs the ones given.
	k := key{HTTP: rd.Image.HTTP, Registry: rd.Image.Registry, AccessModes: rd.AccessModes}
	if rd.StorageClassName != nil {
		k.StorageClass = *rd.StorageClassName
	}
	if rd.VolumeMode != nil {
		k.VolumeMode = string(*rd.VolumeMode)
	}
	// Marshalling a struct of strings cannot fail.
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(b)
	return namePrefix + hex.EncodeToString(sum[:])[:16]
}

// DataVolume is the golden volume of a root disk in namespace ns.
func DataVolume(rd *infrav1.RootDiskSpec, ns string) *cdiv1.DataVolume {
	size := rd.DiskSize
	if rd.ImageSize != nil {
		size = *rd.ImageSize
	}
	return &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(rd), Namespace: ns,
			Labels:      map[string]string{Label: "true"},
			Annotations: map[string]string{immediateBinding: "true", keepAfterCompletion: "false", SourceAnnotation: Describe(&rd.Image)},
		},
		Spec: cdiv1.DataVolumeSpec{
			Source: ImportSource(&rd.Image),
			Storage: &cdiv1.StorageSpec{
				StorageClassName: rd.StorageClassName,
				AccessModes:      rd.AccessModes,
				VolumeMode:       rd.VolumeMode,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		},
	}
}

// Size is the requested size of a golden DataVolume.
func Size(dv *cdiv1.DataVolume) resource.Quantity {
	if dv.Spec.Storage != nil {
		return dv.Spec.Storage.Resources.Requests[corev1.ResourceStorage]
	}
	if dv.Spec.PVC != nil {
		return dv.Spec.PVC.Resources.Requests[corev1.ResourceStorage]
	}
	return resource.Quantity{}
}

// Describe says where an image comes from, for people.
func Describe(img *infrav1.ImageSource) string {
	switch {
	case img.HTTP != nil:
		return img.HTTP.URL
	case img.Registry != nil:
		return img.Registry.URL
	case img.PVC != nil:
		return "pvc " + img.PVC.Namespace + "/" + img.PVC.Name
	case img.DataSource != nil:
		return "dataSource " + img.DataSource.Namespace + "/" + img.DataSource.Name
	}
	return ""
}

// ImportSource is the CDI source that imports img (http or registry),
// nil for a clone source: what CDI's importer is handed, credentials
// included, for a golden volume or a per-VM import.
func ImportSource(img *infrav1.ImageSource) *cdiv1.DataVolumeSource {
	switch {
	case img.HTTP != nil:
		return &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{
			URL: img.HTTP.URL, SecretRef: img.HTTP.SecretRef, CertConfigMap: img.HTTP.CertConfigMap}}
	case img.Registry != nil:
		url := img.Registry.URL
		return &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{
			URL: &url, SecretRef: optional(img.Registry.SecretRef), CertConfigMap: optional(img.Registry.CertConfigMap)}}
	}
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// RootDiskTemplate is the VM's DataVolume template for its root disk, in
// VM namespace ns: a clone of the golden volume goldenVolume (when Needed),
// of the admin's PVC or DataSource, or a per-VM import.
func RootDiskTemplate(rd *infrav1.RootDiskSpec, ns string, goldenVolume *types.NamespacedName) (kubevirtv1.DataVolumeTemplateSpec, error) {
	t := kubevirtv1.DataVolumeTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Name: RootDiskName},
		Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{
			StorageClassName: rd.StorageClassName,
			AccessModes:      rd.AccessModes,
			VolumeMode:       rd.VolumeMode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: rd.DiskSize}},
		}},
	}
	img := &rd.Image
	switch {
	case Needed(rd):
		if goldenVolume == nil {
			return t, fmt.Errorf("the golden volume of %s is not known yet", Describe(img))
		}
		t.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: goldenVolume.Namespace, Name: goldenVolume.Name}}
	case img.PVC != nil:
		t.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: orDefault(img.PVC.Namespace, ns), Name: img.PVC.Name}}
	case img.DataSource != nil:
		dsNS := orDefault(img.DataSource.Namespace, ns)
		t.Spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Namespace: &dsNS, Name: img.DataSource.Name}
	default:
		t.Spec.Source = ImportSource(img)
	}
	return t, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// DataDiskTemplate is the DataVolume template of an extra, blank disk.
func DataDiskTemplate(d *infrav1.DataDiskSpec) kubevirtv1.DataVolumeTemplateSpec {
	return kubevirtv1.DataVolumeTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{
				StorageClassName: d.StorageClassName,
				AccessModes:      d.AccessModes,
				VolumeMode:       d.VolumeMode,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: d.DiskSize}},
			},
		},
	}
}

// StatusOf is the status entry naming the golden volume of a root disk in
// an infra cluster (its kubeconfig Secret; none for the management cluster)
// and namespace.
func StatusOf(infraSecret types.NamespacedName, ns string, rd *infrav1.RootDiskSpec) *infrav1.GoldenImageStatus {
	s := &infrav1.GoldenImageStatus{Namespace: ns, Name: Name(rd)}
	if infraSecret.Name != "" {
		s.InfraCluster = infraSecret.String()
	}
	return s
}

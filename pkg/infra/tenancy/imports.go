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

package tenancy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// More kinds a VM's disks may name: what CDI clones from.
const (
	KindDataSource = "DataSource"
	KindSnapshot   = "VolumeSnapshot"
)

// reservedPrefix begins the label and annotation keys the provider sets
// and trusts: which pool or machine a VM is, whose it is, which DataVolume
// is a golden volume every cluster of the namespace clones from.
const reservedPrefix = "capkv.io/"

// reservedKeys refuses keys under the provider's own prefix on objects the
// VM template makes: a DataVolume labelled capkv.io/golden-image would be
// taken for the golden volume of its name, and cloned into other
// clusters' root disks.
func reservedKeys(labels, annotations map[string]string, p *field.Path) Refusals {
	var rs Refusals
	for _, set := range []struct {
		what string
		keys map[string]string
	}{{"labels", labels}, {"annotations", annotations}} {
		for _, key := range sortedKeys(set.keys) {
			if strings.HasPrefix(key, reservedPrefix) {
				rs = append(rs, refuse(RuleGuestReservedKey, p.Child(set.what).Key(key),
					"keys under %s are the provider's own: it sets them on what it creates, and trusts them", reservedPrefix))
			}
		}
	}
	return rs
}

// templateKeys applies reservedKeys to the VM, its instance template and
// its DataVolume templates.
func templateKeys(vmt *infrav1.VirtualMachineTemplateSpec, p *field.Path) Refusals {
	rs := reservedKeys(vmt.ObjectMeta.Labels, vmt.ObjectMeta.Annotations, p.Child("metadata"))
	if t := vmt.Spec.Template; t != nil {
		rs = append(rs, reservedKeys(t.ObjectMeta.Labels, t.ObjectMeta.Annotations, p.Child("spec", "template", "metadata"))...)
	}
	for i, dv := range vmt.Spec.DataVolumeTemplates {
		rs = append(rs, reservedKeys(dv.Labels, dv.Annotations, p.Child("spec", "dataVolumeTemplates").Index(i).Child("metadata"))...)
	}
	return rs
}

// importObjects are the Secrets and ConfigMaps an import reads in the
// VM's namespace: CDI's importer sends a Secret's keys to the server the
// tenant names, as credentials or headers, so another cluster's Secret
// would leave the infra cluster. Imports with the infra's own rights are
// refused: a vddk init image runs in the namespace, a registry node pull
// and an image stream use the infra's registry credentials.
func importObjects(s *cdiv1.DataVolumeSource, p *field.Path) (Refusals, []Named) {
	if s == nil {
		return nil, nil
	}
	var named []Named
	add := func(kind, name string, fld *field.Path) {
		if name != "" {
			named = append(named, Named{kind, name, fld})
		}
	}
	switch {
	case s.HTTP != nil:
		add(KindSecret, s.HTTP.SecretRef, p.Child("http", "secretRef"))
		add(KindConfigMap, s.HTTP.CertConfigMap, p.Child("http", "certConfigMap"))
		for i, name := range s.HTTP.SecretExtraHeaders {
			add(KindSecret, name, p.Child("http", "secretExtraHeaders").Index(i))
		}
	case s.Registry != nil:
		add(KindSecret, ptr.Deref(s.Registry.SecretRef, ""), p.Child("registry", "secretRef"))
		add(KindConfigMap, ptr.Deref(s.Registry.CertConfigMap, ""), p.Child("registry", "certConfigMap"))
		if m := s.Registry.PullMethod; m != nil && *m == cdiv1.RegistryPullNode {
			return Refusals{refuse(RuleGuestImportImage, p.Child("registry", "pullMethod"),
				"a node pull fetches the image with the infra node's own registry credentials; use pod")}, named
		}
		if s.Registry.ImageStream != nil {
			return Refusals{refuse(RuleGuestImportImage, p.Child("registry", "imageStream"),
				"an image stream resolves images with the infra cluster's credentials; name the image by url")}, named
		}
	case s.S3 != nil:
		add(KindSecret, s.S3.SecretRef, p.Child("s3", "secretRef"))
		add(KindConfigMap, s.S3.CertConfigMap, p.Child("s3", "certConfigMap"))
	case s.GCS != nil:
		add(KindSecret, s.GCS.SecretRef, p.Child("gcs", "secretRef"))
	case s.Imageio != nil:
		add(KindSecret, s.Imageio.SecretRef, p.Child("imageio", "secretRef"))
		add(KindConfigMap, s.Imageio.CertConfigMap, p.Child("imageio", "certConfigMap"))
	case s.VDDK != nil:
		add(KindSecret, s.VDDK.SecretRef, p.Child("vddk", "secretRef"))
		add(KindConfigMap, s.VDDK.ExtraArgs, p.Child("vddk", "extraArgs"))
		if s.VDDK.InitImageURL != "" {
			return Refusals{refuse(RuleGuestImportImage, p.Child("vddk", "initImageURL"),
				"a vddk import runs the image initImageURL names in the infra namespace")}, named
		}
	}
	return nil, named
}

// rootDiskImport checks the root disk's import as CDI's importer gets it
// (goldenplan.ImportSource), a golden volume's or the VM's own.
func rootDiskImport(rd *infrav1.RootDiskSpec, p *field.Path) (Refusals, []Named) {
	if rd == nil {
		return nil, nil
	}
	return importObjects(goldenplan.ImportSource(&rd.Image), p.Child("image"))
}

// sharedCloneSources are the claims, snapshots and data sources a VM's
// disks clone from its own infra namespace. In a namespace the tenant
// shares with others, they must be its cluster's like anything else it
// names: CDI clones with the provider's rights, and another cluster's root
// disk would become this one's data disk. In the tenant's own namespace,
// they are the images its administrator put there
// (docs/golden-images.md).
func sharedCloneSources(spec *infrav1.KubevirtMachineSpec, vmNamespace string, fld *field.Path) []Named {
	here := func(ns string) bool { return ns == "" || ns == vmNamespace }
	var named []Named
	if rd := spec.RootDisk; rd != nil {
		ip := fld.Child("rootDisk", "image")
		if r := rd.Image.PVC; r != nil && here(r.Namespace) {
			named = append(named, Named{KindClaim, r.Name, ip.Child("pvc", "name")})
		}
		if r := rd.Image.DataSource; r != nil && here(r.Namespace) {
			named = append(named, Named{KindDataSource, r.Name, ip.Child("dataSource", "name")})
		}
	}
	for i, t := range spec.VirtualMachineTemplate.Spec.DataVolumeTemplates {
		p := fld.Child("virtualMachineTemplate", "spec", "dataVolumeTemplates").Index(i).Child("spec")
		switch s := t.Spec.Source; {
		case s != nil && s.PVC != nil && here(s.PVC.Namespace):
			named = append(named, Named{KindClaim, s.PVC.Name, p.Child("source", "pvc", "name")})
		case s != nil && s.Snapshot != nil && here(s.Snapshot.Namespace):
			named = append(named, Named{KindSnapshot, s.Snapshot.Name, p.Child("source", "snapshot", "name")})
		case t.Spec.SourceRef != nil && (t.Spec.SourceRef.Namespace == nil || here(*t.Spec.SourceRef.Namespace)):
			named = append(named, Named{KindDataSource, t.Spec.SourceRef.Name, p.Child("sourceRef", "name")})
		}
	}
	return named
}

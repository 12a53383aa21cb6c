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

package webhooks

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// minDiskSize is CDI's smallest DataVolume (docs/kubevirt-behaviour.md#datavolume-names-size-and-immutability).
var minDiskSize = resource.MustParse("1Mi")

// validateProviderDisks checks rootDisk and dataDisks, and that their names do not
// collide with the disks, volumes and DataVolume templates of the VM
// template, to which the provider adds them.
func validateProviderDisks(spec *infrav1.KubevirtMachineSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	taken := sets.New(vmbuilder.UserDataVolume)
	vm := &spec.VirtualMachineTemplate.Spec
	for _, t := range vm.DataVolumeTemplates {
		taken.Insert(t.Name)
	}
	if tmpl := vm.Template; tmpl != nil {
		for _, d := range tmpl.Spec.Domain.Devices.Disks {
			taken.Insert(d.Name)
		}
		for _, v := range tmpl.Spec.Volumes {
			taken.Insert(v.Name)
		}
	}
	if rd := spec.RootDisk; rd != nil {
		rf := fld.Child("rootDisk")
		if taken.Has(goldenplan.RootDiskName) {
			errs = append(errs, field.Invalid(rf, goldenplan.RootDiskName,
				"the virtualMachineTemplate already has a disk, volume or DataVolume template named "+goldenplan.RootDiskName))
		}
		taken.Insert(goldenplan.RootDiskName)
		errs = append(errs, validateImage(&rd.Image, rf.Child("image"))...)
		errs = append(errs, validateSize(rd.DiskSize, rf.Child("diskSize"))...)
		if rd.ImageSize != nil {
			errs = append(errs, validateSize(*rd.ImageSize, rf.Child("imageSize"))...)
			if rd.ImageSize.Cmp(rd.DiskSize) > 0 {
				errs = append(errs, field.Invalid(rf.Child("imageSize"), rd.ImageSize.String(),
					"must not be larger than diskSize: a clone cannot be smaller than its source"))
			}
		}
		if rd.CloneStrategy == infrav1.CloneStrategyPerVMImport && (rd.Image.PVC != nil || rd.Image.DataSource != nil) {
			errs = append(errs, field.Invalid(rf.Child("cloneStrategy"), rd.CloneStrategy,
				"PVC and DataSource images are always cloned; PerVMImport applies to http and registry images"))
		}
	}
	for i := range spec.DataDisks {
		d := &spec.DataDisks[i]
		df := fld.Child("dataDisks").Index(i)
		errs = append(errs, dns1123Label(d.Name, df.Child("name"))...)
		if taken.Has(d.Name) {
			errs = append(errs, field.Duplicate(df.Child("name"), d.Name))
		}
		taken.Insert(d.Name)
		errs = append(errs, validateSize(d.DiskSize, df.Child("diskSize"))...)
	}
	return errs
}

func validateImage(img *infrav1.ImageSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case img.HTTP != nil:
		u := img.HTTP.URL
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, field.Invalid(fld.Child("http", "url"), u, "must be an http:// or https:// URL"))
		}
	case img.Registry != nil:
		u := img.Registry.URL
		if !strings.HasPrefix(u, "docker://") && !strings.HasPrefix(u, "oci-archive://") {
			errs = append(errs, field.Invalid(fld.Child("registry", "url"), u, "must be a docker:// or oci-archive:// URL, as CDI expects"))
		}
	case img.PVC != nil:
		errs = append(errs, dns1123Subdomain(img.PVC.Name, fld.Child("pvc", "name"))...)
	case img.DataSource != nil:
		errs = append(errs, dns1123Subdomain(img.DataSource.Name, fld.Child("dataSource", "name"))...)
	default:
		errs = append(errs, field.Required(fld, "one of http, registry, pvc or dataSource"))
	}
	return errs
}

func validateSize(q resource.Quantity, fld *field.Path) field.ErrorList {
	if q.Cmp(minDiskSize) < 0 {
		return field.ErrorList{field.Invalid(fld, q.String(), "must be at least 1Mi")}
	}
	return nil
}

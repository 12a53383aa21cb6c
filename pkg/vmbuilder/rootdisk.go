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

package vmbuilder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
)

// allowClaimAdoptionAnnotation is what KubeVirt puts on every DataVolume it
// makes from a VM's template, so CDI may adopt a claim of the same name.
const allowClaimAdoptionAnnotation = "cdi.kubevirt.io/allowClaimAdoption"

// RootDataVolume is the root disk's DataVolume as KubeVirt v1.7.0 would
// create it from the DataVolume template Build gives the VM
// (GenerateDataVolumeFromTemplate in pkg/storage/types/dv.go): the
// template's name, metadata and spec, claim adoption allowed, and the VM's
// priority class. Only the owner differs: in.Owner (the KubevirtMachine)
// instead of the VM, which does not exist yet. It lets a machine clone its
// root disk while it waits for its bootstrap data; KubeVirt then uses the
// DataVolume of that name as it is (docs/kubevirt-behaviour.md#a-vm-uses-an-existing-datavolume-of-its-template).
func RootDataVolume(in Input) (*cdiv1.DataVolume, error) {
	if in.Spec.RootDisk == nil {
		return nil, nil
	}
	t, err := golden.RootDiskTemplate(in.Spec.RootDisk, in.Namespace, in.GoldenVolume)
	if err != nil {
		return nil, err
	}
	annotateTemplate(&t, in)
	dv := &cdiv1.DataVolume{
		ObjectMeta: *t.ObjectMeta.DeepCopy(),
		Spec:       *t.Spec.DeepCopy(),
	}
	dv.Name = DataVolumeName(in.Name, t.Name)
	dv.Namespace = in.Namespace
	dv.Annotations = merged(dv.Annotations, map[string]string{allowClaimAdoptionAnnotation: "true"})
	if tmpl := in.Spec.VirtualMachineTemplate.Spec.Template; dv.Spec.PriorityClassName == "" && tmpl != nil {
		dv.Spec.PriorityClassName = tmpl.Spec.PriorityClassName
	}
	if in.Owner != nil {
		dv.OwnerReferences = []metav1.OwnerReference{*in.Owner}
	}
	return dv, nil
}

// annotateTemplate adds to a DataVolume template what the provider adds to
// each: KubeVirt copies the annotations to the DataVolume, so its events
// map back to the machine even after the VM is gone.
func annotateTemplate(t *kubevirtv1.DataVolumeTemplateSpec, in Input) {
	t.Annotations = merged(t.Annotations, map[string]string{infrav1.OwnerAnnotation: OwnerOf(in.KubevirtMachineNamespace, in.Name)})
}

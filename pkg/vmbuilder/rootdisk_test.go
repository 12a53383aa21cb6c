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
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// TestRootDataVolumeIsWhatKubeVirtWouldCreate checks that the DataVolume a
// machine creates early is the one KubeVirt would make from the VM's root
// disk template, so that using it instead changes nothing but the owner.
func TestRootDataVolumeIsWhatKubeVirtWouldCreate(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: "KubevirtMachine", Name: "md-0-abc", UID: "u1"}
	for _, tt := range []struct {
		name     string
		mutate   func(*Input)
		priority string
	}{
		{name: "golden volume, same namespace owner", mutate: func(in *Input) { in.Owner = &owner }},
		{name: "no owner on another cluster", mutate: func(in *Input) { in.Owner = nil }},
		{name: "the VM's priority class", priority: "tenant-high", mutate: func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.PriorityClassName = "tenant-high"
		}},
		{name: "class, access and volume mode of the root disk", mutate: func(in *Input) {
			class := "csi-clone"
			in.Spec.RootDisk.StorageClassName = &class
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			in.Spec.RootDisk = &infrav1.RootDiskSpec{
				Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://images.example/a.qcow2"}},
				DiskSize: resource.MustParse("20Gi"),
			}
			in.GoldenVolume = &types.NamespacedName{Namespace: in.Namespace, Name: "capkv-golden-x"}
			tt.mutate(&in)
			vm, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			dv, err := RootDataVolume(in)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := vm.Spec.DataVolumeTemplates[0]
			if dv.Name != tmpl.Name || dv.Namespace != vm.Namespace {
				t.Errorf("DataVolume %s/%s, the VM's template names %s/%s", dv.Namespace, dv.Name, vm.Namespace, tmpl.Name)
			}
			want := maps.Clone(tmpl.Annotations)
			want[allowClaimAdoptionAnnotation] = "true"
			if !maps.Equal(dv.Annotations, want) {
				t.Errorf("annotations %v, want %v", dv.Annotations, want)
			}
			if dv.Annotations[infrav1.OwnerAnnotation] != OwnerOf(in.KubevirtMachineNamespace, in.Name) {
				t.Errorf("the owner annotation maps the DataVolume's events back to the machine: %v", dv.Annotations)
			}
			wantSpec := tmpl.Spec.DeepCopy()
			wantSpec.PriorityClassName = tt.priority
			if !equality.Semantic.DeepEqual(dv.Spec, *wantSpec) {
				t.Errorf("spec %+v, want the template's %+v", dv.Spec, *wantSpec)
			}
			switch {
			case in.Owner == nil && len(dv.OwnerReferences) > 0:
				t.Errorf("owner references %v without an owner", dv.OwnerReferences)
			case in.Owner != nil && (len(dv.OwnerReferences) != 1 || dv.OwnerReferences[0] != *in.Owner):
				t.Errorf("owner references %v, want %v", dv.OwnerReferences, *in.Owner)
			}
		})
	}
}

func TestRootDataVolumeNeedsTheGoldenVolume(t *testing.T) {
	in := baseInput()
	if dv, err := RootDataVolume(in); dv != nil || err != nil {
		t.Errorf("no root disk, no DataVolume: %v, %v", dv, err)
	}
	in.Spec.RootDisk = &infrav1.RootDiskSpec{
		Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://images.example/a.qcow2"}},
		DiskSize: resource.MustParse("20Gi"),
	}
	if _, err := RootDataVolume(in); err == nil {
		t.Error("a golden root disk is cloned from its golden volume, which is not known yet")
	}
}

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

package goldenplan

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func rootDisk(mutate func(*infrav1.RootDiskSpec)) *infrav1.RootDiskSpec {
	rd := &infrav1.RootDiskSpec{
		Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://images.example/a.qcow2"}},
		DiskSize: resource.MustParse("20Gi"),
	}
	if mutate != nil {
		mutate(rd)
	}
	return rd
}

func TestNameIdentifiesImageClassAndMode(t *testing.T) {
	base := Name(rootDisk(nil))
	same := []func(*infrav1.RootDiskSpec){
		func(rd *infrav1.RootDiskSpec) { rd.DiskSize = resource.MustParse("40Gi") },
		func(rd *infrav1.RootDiskSpec) { rd.CloneStrategy = infrav1.CloneStrategyGolden },
	}
	for i, m := range same {
		if n := Name(rootDisk(m)); n != base {
			t.Errorf("same case %d: %s != %s", i, n, base)
		}
	}
	different := []func(*infrav1.RootDiskSpec){
		func(rd *infrav1.RootDiskSpec) { rd.Image.HTTP.URL = "https://images.example/b.qcow2" },
		func(rd *infrav1.RootDiskSpec) { rd.StorageClassName = ptr.To("fast") },
		func(rd *infrav1.RootDiskSpec) { rd.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
		func(rd *infrav1.RootDiskSpec) {
			rd.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		},
		func(rd *infrav1.RootDiskSpec) {
			rd.Image = infrav1.ImageSource{Registry: &infrav1.RegistryImageSource{URL: "docker://quay.io/a"}}
		},
	}
	for i, m := range different {
		if n := Name(rootDisk(m)); n == base {
			t.Errorf("different case %d has the same name %s", i, n)
		}
	}
	if len(base) > 63 {
		t.Errorf("name %q too long for a label value or hostname", base)
	}
}

func TestDataVolume(t *testing.T) {
	rd := rootDisk(func(rd *infrav1.RootDiskSpec) { rd.ImageSize = ptr.To(resource.MustParse("10Gi")) })
	dv := DataVolume(rd, "tenants")
	if dv.Annotations[immediateBinding] != "true" || dv.Annotations[keepAfterCompletion] != "false" || dv.Labels[Label] != "true" {
		t.Errorf("metadata %+v", dv.ObjectMeta)
	}
	if got := dv.Spec.Storage.Resources.Requests[corev1.ResourceStorage]; got.String() != "10Gi" {
		t.Errorf("size %s, want the image size", got.String())
	}
	if dv.Spec.Source.HTTP == nil || dv.Namespace != "tenants" {
		t.Errorf("source %+v ns %s", dv.Spec.Source, dv.Namespace)
	}
}

func TestRootDiskTemplate(t *testing.T) {
	goldenVolume := &types.NamespacedName{Namespace: "tenants", Name: "capkv-golden-x"}
	tmpl, err := RootDiskTemplate(rootDisk(nil), "tenants", goldenVolume)
	if err != nil || tmpl.Spec.Source.PVC.Name != "capkv-golden-x" || tmpl.Name != RootDiskName {
		t.Errorf("golden clone: %+v %v", tmpl, err)
	}
	if got := tmpl.Spec.Storage.Resources.Requests[corev1.ResourceStorage]; got.String() != "20Gi" {
		t.Errorf("clone size %s, want the disk size", got.String())
	}
	if _, err := RootDiskTemplate(rootDisk(nil), "tenants", nil); err == nil {
		t.Error("a golden clone without its golden volume must fail")
	}
	perVM, _ := RootDiskTemplate(rootDisk(func(rd *infrav1.RootDiskSpec) { rd.CloneStrategy = infrav1.CloneStrategyPerVMImport }), "tenants", nil)
	if perVM.Spec.Source.HTTP == nil {
		t.Errorf("per-VM import: %+v", perVM.Spec.Source)
	}
	pvc, _ := RootDiskTemplate(rootDisk(func(rd *infrav1.RootDiskSpec) {
		rd.Image = infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Name: "seed"}}
	}), "tenants", nil)
	if pvc.Spec.Source.PVC.Namespace != "tenants" || pvc.Spec.Source.PVC.Name != "seed" {
		t.Errorf("pvc clone: %+v", pvc.Spec.Source)
	}
	ds, _ := RootDiskTemplate(rootDisk(func(rd *infrav1.RootDiskSpec) {
		rd.Image = infrav1.ImageSource{DataSource: &infrav1.ImageVolumeRef{Namespace: "images", Name: "ubuntu"}}
	}), "tenants", nil)
	if ds.Spec.SourceRef == nil || *ds.Spec.SourceRef.Namespace != "images" || ds.Spec.Source != nil {
		t.Errorf("dataSource clone: %+v", ds.Spec)
	}
	if Needed(rootDisk(func(rd *infrav1.RootDiskSpec) {
		rd.Image = infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Name: "seed"}}
	})) {
		t.Error("admin PVCs need no golden volume")
	}
}

func TestClassBlueprint(t *testing.T) {
	for _, tt := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   bool
	}{
		{name: "no owner", want: false},
		{name: "a ClusterClass", owners: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "ClusterClass", Name: "kubevirt"}}, want: true},
		{name: "a ClusterClass at an older version", owners: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "ClusterClass", Name: "kubevirt"}}, want: true},
		{name: "a Cluster (a topology's copy)", owners: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "blue"}}, want: false},
		{name: "a ClusterClass of another group", owners: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "ClusterClass", Name: "x"}}, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassBlueprint(tt.owners); got != tt.want {
				t.Errorf("ClassBlueprint() = %t, want %t", got, tt.want)
			}
		})
	}
}

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

package poolbuilder

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

func input(mutate func(in *Input)) Input {
	in := Input{Replicas: 3, VM: vmbuilder.Input{
		Name: "pool-0", Namespace: "tenant", KubevirtMachineNamespace: "tenant",
		ClusterName: "c1", MachinePool: "mp-0", UserDataSecret: "pool-0-userdata", Format: "cloud-config",
		Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}},
			Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("2Gi"))}},
				},
			}},
		}},
	}}
	if mutate != nil {
		mutate(&in)
	}
	return in
}

func TestBuild(t *testing.T) {
	golden := &types.NamespacedName{Namespace: "tenant", Name: "golden-ubuntu"}
	withRootDisk := func(in *Input) {
		in.VM.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{
			Registry: &infrav1.RegistryImageSource{URL: "docker://quay.io/capk/ubuntu:22.04"}}, DiskSize: resource.MustParse("20Gi")}
		in.VM.GoldenVolume = golden
	}
	for _, tt := range []struct {
		name  string
		in    Input
		check func(t *testing.T, p *poolv1.VirtualMachinePool)
	}{
		{name: "selects its VMs by the pool label, with the replicas asked", in: input(nil), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			want := map[string]string{infrav1.KubevirtMachinePoolLabel: "pool-0"}
			if !equalMaps(p.Spec.Selector.MatchLabels, want) {
				t.Errorf("selector %v, want %v", p.Spec.Selector.MatchLabels, want)
			}
			for _, l := range []map[string]string{p.Spec.VirtualMachineTemplate.ObjectMeta.Labels, p.Spec.VirtualMachineTemplate.Spec.Template.ObjectMeta.Labels} {
				if l[infrav1.KubevirtMachinePoolLabel] != "pool-0" || l[infrav1.MachinePoolLabel] != "mp-0" || l[infrav1.ClusterNameLabel] != "c1" {
					t.Errorf("template labels %v lack the pool's, MachinePool's or cluster's", l)
				}
			}
			if *p.Spec.Replicas != 3 || p.Name != "pool-0" || p.Namespace != "tenant" {
				t.Errorf("pool %s/%s with %d replicas", p.Namespace, p.Name, *p.Spec.Replicas)
			}
		}},
		{name: "keeps the user's labels, drops those that name one machine", in: input(nil), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			for _, l := range []map[string]string{p.Spec.VirtualMachineTemplate.ObjectMeta.Labels, p.Spec.VirtualMachineTemplate.Spec.Template.ObjectMeta.Labels} {
				for _, k := range perVMLabels {
					if _, ok := l[k]; ok {
						t.Errorf("label %s=%s on a template every VM shares", k, l[k])
					}
				}
			}
			if p.Spec.VirtualMachineTemplate.ObjectMeta.Labels["team"] != "a" {
				t.Errorf("user label lost: %v", p.Spec.VirtualMachineTemplate.ObjectMeta.Labels)
			}
		}},
		{name: "names the KubevirtMachinePool, not a KubevirtMachine", in: input(withRootDisk), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			for _, a := range []map[string]string{p.Annotations, p.Spec.VirtualMachineTemplate.ObjectMeta.Annotations,
				p.Spec.VirtualMachineTemplate.Spec.Template.ObjectMeta.Annotations, p.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates[0].Annotations} {
				if a[infrav1.PoolOwnerAnnotation] != "tenant/pool-0" {
					t.Errorf("annotations %v: want %s=tenant/pool-0", a, infrav1.PoolOwnerAnnotation)
				}
				if _, ok := a[infrav1.OwnerAnnotation]; ok {
					t.Errorf("annotations %v name a KubevirtMachine", a)
				}
			}
		}},
		{name: "leaves hostnames and DataVolume indexes to KubeVirt", in: input(withRootDisk), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			spec := p.Spec.VirtualMachineTemplate.Spec
			if spec.Template.Spec.Hostname != "" {
				t.Errorf("hostname %q shared by every VM", spec.Template.Spec.Hostname)
			}
			dv := spec.DataVolumeTemplates[0]
			if dv.Name != "pool-0-rootdisk" || spec.Template.Spec.Volumes[1].DataVolume.Name != dv.Name {
				t.Errorf("root disk template %q, volumes %+v", dv.Name, spec.Template.Spec.Volumes)
			}
			if src := dv.Spec.Source; src == nil || src.PVC == nil || src.PVC.Name != golden.Name {
				t.Errorf("root disk not cloned from the golden volume: %+v", dv.Spec)
			}
		}},
		{name: "spreads the pool's VMs among themselves", in: input(func(in *Input) {
			in.VM.Spec.Placement.PodAntiAffinityPreset = infrav1.PresetHard
		}), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			terms := p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			if len(terms) != 1 || terms[0].LabelSelector.MatchLabels[infrav1.MachinePoolLabel] != "mp-0" {
				t.Errorf("anti-affinity %+v: want the MachinePool's VMs kept apart", terms)
			}
		}},
		{name: "removes and updates nothing by itself", in: input(nil), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			if p.Spec.ScaleInStrategy == nil || p.Spec.ScaleInStrategy.Unmanaged == nil ||
				p.Spec.UpdateStrategy == nil || p.Spec.UpdateStrategy.Unmanaged == nil || p.Spec.Autohealing != nil {
				t.Errorf("strategies: scale-in %+v, update %+v, autohealing %+v", p.Spec.ScaleInStrategy, p.Spec.UpdateStrategy, p.Spec.Autohealing)
			}
		}},
		{name: "hashes a pool name too long for a label", in: input(func(in *Input) {
			in.VM.Name = strings.Repeat("p", 70)
		}), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			v := p.Spec.Selector.MatchLabels[infrav1.KubevirtMachinePoolLabel]
			if v == "" || len(v) > 63 || p.Spec.VirtualMachineTemplate.ObjectMeta.Labels[infrav1.KubevirtMachinePoolLabel] != v {
				t.Errorf("selector value %q must be a valid label value on the template too", v)
			}
		}},
		{name: "is owned by the KubevirtMachinePool where it can be", in: input(func(in *Input) {
			in.VM.Owner = &metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: "KubevirtMachinePool", Name: "pool-0", UID: "u1", Controller: ptr.To(true)}
		}), check: func(t *testing.T, p *poolv1.VirtualMachinePool) {
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u1" {
				t.Errorf("owners %+v", p.OwnerReferences)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestBuildRefusesAMissingInstanceTemplate(t *testing.T) {
	if _, err := Build(input(func(in *Input) { in.VM.Spec.VirtualMachineTemplate.Spec.Template = nil })); err == nil {
		t.Error("built a pool without an instance template")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOutdated(t *testing.T) {
	build := func(mutate func(in *Input)) *poolv1.VirtualMachinePool {
		t.Helper()
		p, err := Build(input(mutate))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	current := build(nil)
	vmOf := func(p *poolv1.VirtualMachinePool) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Annotations: p.Spec.VirtualMachineTemplate.ObjectMeta.Annotations}}
	}
	for _, tt := range []struct {
		name     string
		vm       *kubevirtv1.VirtualMachine
		outdated bool
	}{
		{name: "a VM of the current template", vm: vmOf(current), outdated: false},
		{name: "a VM of the same template at other replicas", vm: vmOf(build(func(in *Input) { in.Replicas = 7 })), outdated: false},
		{name: "a VM of a template with other labels", vm: vmOf(build(func(in *Input) {
			in.VM.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "b"}
		})), outdated: true},
		{name: "a VM of a template with more memory", vm: vmOf(build(func(in *Input) {
			in.VM.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("4Gi"))
		})), outdated: true},
		{name: "a VM made before templates were hashed", vm: &kubevirtv1.VirtualMachine{}, outdated: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Outdated(current, tt.vm); got != tt.outdated {
				t.Errorf("Outdated = %v, want %v", got, tt.outdated)
			}
		})
	}
}

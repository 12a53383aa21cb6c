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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func baseInput() Input {
	return Input{
		Name: "md-0-abc", Namespace: "tenant", KubevirtMachineNamespace: "tenant",
		ClusterName: "c1", MachineName: "md-0-abc-m", MachineDeployment: "md-0",
		UserDataSecret: "md-0-abc-userdata", Format: "cloud-config",
		Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"}},
			Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}},
						Memory:  &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("2Gi"))},
					},
					Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
						ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/capk/ubuntu:22.04"}}}},
				},
			}},
		}},
	}
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Input)
		check  func(t *testing.T, in Input, vm *kubevirtv1.VirtualMachine)
	}{
		{"identity labels on VM and instance, user labels kept", nil, func(t *testing.T, in Input, vm *kubevirtv1.VirtualMachine) {
			want := map[string]string{
				"team": "a", infrav1.ClusterNameLabel: "c1", infrav1.RoleLabel: infrav1.RoleWorker,
				infrav1.MachineLabel: "md-0-abc-m", infrav1.MachineDeploymentLabel: "md-0",
				infrav1.KubevirtMachineLabel: "md-0-abc", infrav1.KubevirtMachineNamespaceLabel: "tenant", infrav1.VMNameLabel: "md-0-abc",
			}
			expectEqual(t, "VM labels", vm.Labels, want)
			delete(want, "team")
			expectEqual(t, "instance labels", vm.Spec.Template.ObjectMeta.Labels, want)
			expectEqual(t, "annotations", vm.Annotations, map[string]string{"note": "x", infrav1.OwnerAnnotation: "tenant/md-0-abc"})
			if vm.Spec.Template.ObjectMeta.Annotations[infrav1.OwnerAnnotation] != "tenant/md-0-abc" {
				t.Error("instance template lacks the owner annotation")
			}
			if vm.Name != "md-0-abc" || vm.Namespace != "tenant" {
				t.Errorf("VM is %s/%s", vm.Namespace, vm.Name)
			}
		}},
		{"control plane role", func(in *Input) { in.ControlPlane = true; in.MachineDeployment = "" }, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Labels[infrav1.RoleLabel] != infrav1.RoleControlPlane {
				t.Errorf("role %q", vm.Labels[infrav1.RoleLabel])
			}
			if _, ok := vm.Labels[infrav1.MachineDeploymentLabel]; ok {
				t.Error("MachineDeployment label set without a MachineDeployment")
			}
		}},
		{"run strategy defaults to Always", nil, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways || vm.Spec.Running != nil {
				t.Errorf("runStrategy %v running %v", vm.Spec.RunStrategy, vm.Spec.Running)
			}
		}},
		{"running kept, no runStrategy added", func(in *Input) { in.Spec.VirtualMachineTemplate.Spec.Running = ptr.To(true) }, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Spec.RunStrategy != nil || !*vm.Spec.Running {
				t.Errorf("runStrategy %v running %v", vm.Spec.RunStrategy, vm.Spec.Running)
			}
		}},
		{"runStrategy kept", func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyRerunOnFailure)
		}, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if *vm.Spec.RunStrategy != kubevirtv1.RunStrategyRerunOnFailure {
				t.Errorf("runStrategy %v", *vm.Spec.RunStrategy)
			}
		}},
		{"NoCloud user data first among volumes, disk last", nil, func(t *testing.T, in Input, vm *kubevirtv1.VirtualMachine) {
			spec := vm.Spec.Template.Spec
			v := spec.Volumes[0]
			if v.Name != UserDataVolume || v.CloudInitNoCloud == nil || v.CloudInitNoCloud.UserDataSecretRef.Name != in.UserDataSecret || v.CloudInitNoCloud.NetworkDataSecretRef != nil {
				t.Errorf("user data volume %+v", v)
			}
			disks := spec.Domain.Devices.Disks
			if disks[0].Name != "root" || disks[len(disks)-1].Name != UserDataVolume {
				t.Errorf("disks %+v", disks)
			}
		}},
		{"ConfigDrive on request, with network data", func(in *Input) {
			in.Spec.UserData.CloudInitDataSource = infrav1.CloudInitConfigDrive
			in.HasNetworkData = true
		}, func(t *testing.T, in Input, vm *kubevirtv1.VirtualMachine) {
			v := vm.Spec.Template.Spec.Volumes[0]
			if v.CloudInitConfigDrive == nil || v.CloudInitNoCloud != nil || v.CloudInitConfigDrive.NetworkDataSecretRef.Name != in.UserDataSecret {
				t.Errorf("user data volume %+v", v)
			}
		}},
		{"Ignition on a config drive", func(in *Input) { in.Format = "ignition" }, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Spec.Template.Spec.Volumes[0].CloudInitConfigDrive == nil {
				t.Errorf("ignition not on a config drive: %+v", vm.Spec.Template.Spec.Volumes[0])
			}
		}},
		{"failure domain narrows the user's node affinity", func(in *Input) {
			in.FailureDomain = "zone-b"
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "big", Operator: corev1.NodeSelectorOpExists}}},
				}}}}
		}, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			terms := vm.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 2 {
				t.Fatalf("terms %+v", terms)
			}
			for _, term := range terms {
				last := term.MatchExpressions[len(term.MatchExpressions)-1]
				if len(term.MatchExpressions) != 2 || last.Key != corev1.LabelTopologyZone || last.Values[0] != "zone-b" {
					t.Errorf("term %+v", term)
				}
			}
		}},
		{"failure domain with a custom label and no affinity", func(in *Input) {
			in.FailureDomain = "rack-1"
			in.FailureDomainSelector = map[string]string{"example.com/rack": "rack-1"}
		},
			func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
				terms := vm.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "example.com/rack" {
					t.Errorf("terms %+v", terms)
				}
			}},
		{"instancetype: no cpu or memory added", func(in *Input) {
			s := &in.Spec.VirtualMachineTemplate.Spec
			s.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.medium"}
			s.Preference = &kubevirtv1.PreferenceMatcher{Name: "ubuntu"}
			s.Template.Spec.Domain.Memory = nil
		}, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			d := vm.Spec.Template.Spec.Domain
			if d.CPU != nil || d.Memory != nil || len(d.Resources.Requests) > 0 || len(d.Resources.Limits) > 0 {
				t.Errorf("resources added beside an instancetype: cpu %v memory %v resources %v", d.CPU, d.Memory, d.Resources)
			}
			if vm.Spec.Instancetype.Name != "u1.medium" || vm.Spec.Preference.Name != "ubuntu" {
				t.Error("instancetype or preference lost")
			}
		}},
		{"eviction strategy passed through", func(in *Input) {
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategyExternal)
		}, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if *vm.Spec.Template.Spec.EvictionStrategy != kubevirtv1.EvictionStrategyExternal {
				t.Error("eviction strategy changed")
			}
		}},
		{"guest-agent check adds the sentinel probe", func(in *Input) { in.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyGuestAgent },
			func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
				p := vm.Spec.Template.Spec.ReadinessProbe
				if p == nil || p.Exec == nil || !strings.Contains(strings.Join(p.Exec.Command, " "), infrav1.BootstrapSentinelFile) {
					t.Errorf("probe %+v", p)
				}
			}},
		{"no probe without guest-agent check", nil, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Spec.Template.Spec.ReadinessProbe != nil {
				t.Error("probe added")
			}
		}},
		{"owner reference only when given", func(in *Input) {
			in.Owner = &metav1.OwnerReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "KubevirtMachine", Name: "md-0-abc", UID: "u1", Controller: ptr.To(true)}
		}, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if len(vm.OwnerReferences) != 1 || vm.OwnerReferences[0].UID != "u1" {
				t.Errorf("owners %+v", vm.OwnerReferences)
			}
		}},
		{"hostname is a DNS label", func(in *Input) { in.Name = strings.Repeat("a", 70) + ".x" }, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if h := vm.Spec.Template.Spec.Hostname; h != strings.Repeat("a", 63) {
				t.Errorf("hostname %q", h)
			}
			if _, ok := vm.Labels[infrav1.VMNameLabel]; ok {
				t.Error("a label value over 63 characters was set")
			}
		}},
		{"user hostname kept", func(in *Input) { in.Spec.VirtualMachineTemplate.Spec.Template.Spec.Hostname = "mine" }, func(t *testing.T, _ Input, vm *kubevirtv1.VirtualMachine) {
			if vm.Spec.Template.Spec.Hostname != "mine" {
				t.Error("hostname replaced")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			if tt.modify != nil {
				tt.modify(&in)
			}
			before := in.Spec.DeepCopy()
			vm, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, in, vm)
			if !equality.Semantic.DeepEqual(before, &in.Spec) {
				t.Error("Build modified its input")
			}
		})
	}
}

func TestBuildNeedsTemplate(t *testing.T) {
	in := baseInput()
	in.Spec.VirtualMachineTemplate.Spec.Template = nil
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "spec.template") {
		t.Errorf("err %v", err)
	}
}

func expectEqual(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func TestBuildPrefixesDataVolumes(t *testing.T) {
	in := baseInput()
	s := &in.Spec.VirtualMachineTemplate.Spec
	s.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}}, {ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	s.Template.Spec.Volumes = []kubevirtv1.Volume{
		{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root"}}},
		{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		{Name: "other", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "shared"}}},
	}
	vm, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if n := vm.Spec.DataVolumeTemplates[0].Name; n != "md-0-abc-root" {
		t.Errorf("template name %q", n)
	}
	if a := vm.Spec.DataVolumeTemplates[1].Annotations[infrav1.OwnerAnnotation]; a != "tenant/md-0-abc" {
		t.Errorf("DataVolume template owner annotation %q", a)
	}
	vols := vm.Spec.Template.Spec.Volumes[1:] // after the user data volume
	if vols[0].DataVolume.Name != "md-0-abc-root" || vols[1].PersistentVolumeClaim.ClaimName != "md-0-abc-data" || vols[2].DataVolume.Name != "shared" {
		t.Errorf("volumes %+v", vols)
	}
	if in.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates[0].Name != "root" {
		t.Error("input modified")
	}
}

func TestBuildRootAndDataDisks(t *testing.T) {
	in := baseInput()
	in.Spec.RootDisk = &infrav1.RootDiskSpec{
		Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://images.example/a.qcow2"}},
		DiskSize: resource.MustParse("20Gi"),
	}
	in.Spec.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("50Gi"), Hotpluggable: true}}
	if _, err := Build(in); err == nil {
		t.Fatal("a golden root disk needs its golden volume")
	}
	in.GoldenVolume = &types.NamespacedName{Namespace: "tenant", Name: "capkv-golden-x"}
	vm, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	dvs := vm.Spec.DataVolumeTemplates
	if len(dvs) != 2 || dvs[0].Name != "md-0-abc-rootdisk" || dvs[0].Spec.Source.PVC.Name != "capkv-golden-x" || dvs[1].Name != "md-0-abc-data" {
		t.Fatalf("DataVolume templates %+v", dvs)
	}
	disks := vm.Spec.Template.Spec.Domain.Devices.Disks
	if disks[0].Name != "rootdisk" || disks[1].Name != "root" {
		t.Errorf("the root disk must boot first: %+v", disks)
	}
	var data *kubevirtv1.Volume
	for i, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			data = &vm.Spec.Template.Spec.Volumes[i]
		}
	}
	if data == nil || data.DataVolume.Name != "md-0-abc-data" || !data.DataVolume.Hotpluggable {
		t.Errorf("data volume %+v", data)
	}
	for _, d := range disks {
		if d.Name == "data" && d.Disk.Bus != kubevirtv1.DiskBusSCSI {
			t.Errorf("hotplug disk on bus %s", d.Disk.Bus)
		}
	}
}

func TestDataVolumeName(t *testing.T) {
	// A topology worker of Cluster API's upgrade spec: 57 characters.
	long := "k8s-upgrade-and-conformance-51y181-md-0-gx4mr-kqldp-2dztc"
	tests := []struct {
		name, vm, template, want string
	}{
		{name: "fits: kept as it was", vm: "md-0-abc", template: "rootdisk", want: "md-0-abc-rootdisk"},
		{name: "exactly 63 characters: kept", vm: strings.Repeat("a", 54), template: "rootdisk", want: strings.Repeat("a", 54) + "-rootdisk"},
		{name: "too long: the first part, a hash of the whole (sha256), the template, in 63", vm: long, template: "rootdisk",
			want: "k8s-upgrade-and-conformance-51y181-md-0-gx4mr-05452069-rootdisk"},
		{name: "another name of the same first part: another hash", vm: long[:len(long)-1] + "x", template: "rootdisk"},
		{name: "a cut that would end in a dash loses it", vm: strings.Repeat("a", 45) + "-" + strings.Repeat("b", 20), template: "rootdisk"},
		{name: "a template name longer than any label: left for admission to refuse", vm: "vm", template: strings.Repeat("d", 70),
			want: "vm-" + strings.Repeat("d", 70)},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DataVolumeName(tt.vm, tt.template)
			if tt.want != "" && got != tt.want {
				t.Fatalf("DataVolumeName(%q, %q) = %q, want %q", tt.vm, tt.template, got, tt.want)
			}
			if len(tt.template) < 50 && len(validation.IsDNS1123Label(got)) > 0 {
				t.Fatalf("DataVolumeName(%q, %q) = %q, not a DNS-1123 label: %v", tt.vm, tt.template, got, validation.IsDNS1123Label(got))
			}
			if other, ok := seen[got]; ok {
				t.Fatalf("VM names %q and %q share DataVolume name %q", other, tt.vm, got)
			}
			seen[got] = tt.vm
		})
	}
}

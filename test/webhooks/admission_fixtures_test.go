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

package webhooks_test

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// validVMSpec is a minimal VM spec KubeVirt accepts.
func validVMSpec() kubevirtv1.VirtualMachineSpec {
	guest := resource.MustParse("2Gi")
	return kubevirtv1.VirtualMachineSpec{
		RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
		Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					CPU:    &kubevirtv1.CPU{Cores: 2},
					Memory: &kubevirtv1.Memory{Guest: &guest},
					Devices: kubevirtv1.Devices{
						Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: "virtio"}}}},
						Interfaces: []kubevirtv1.Interface{{Name: "default",
							InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}},
					},
				},
				Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/ubuntu:22.04"}}}},
			},
		},
	}
}

func machine(mutate func(m *infrav1.KubevirtMachine)) client.Object {
	m := &infrav1.KubevirtMachine{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace},
		Spec:       infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: validVMSpec()}},
	}
	mutate(m)
	return m
}

// vmi mutates the VMI spec of a machine.
func vmi(mutate func(s *kubevirtv1.VirtualMachineInstanceSpec)) client.Object {
	return machine(func(m *infrav1.KubevirtMachine) { mutate(&m.Spec.VirtualMachineTemplate.Spec.Template.Spec) })
}

// withDataVolume replaces the root container disk with a DataVolume template.
func withDataVolume(mutate func(t *kubevirtv1.DataVolumeTemplateSpec)) client.Object {
	return machine(func(m *infrav1.KubevirtMachine) {
		vm := &m.Spec.VirtualMachineTemplate.Spec
		vm.Template.Spec.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root-dv"}}
		t := kubevirtv1.DataVolumeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "root-dv"},
			Spec: cdiv1.DataVolumeSpec{
				Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: ptr.To("docker://quay.io/containerdisks/ubuntu:22.04")}},
				Storage: &cdiv1.StorageSpec{},
			},
		}
		mutate(&t)
		vm.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{t}
	})
}

func cluster(mutate func(c *infrav1.KubevirtCluster)) client.Object {
	c := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace}}
	mutate(c)
	return c
}

func machineTemplate(mutate func(t *infrav1.KubevirtMachineTemplate)) client.Object {
	t := &infrav1.KubevirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace},
		Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{
			Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: validVMSpec()}},
		}},
	}
	mutate(t)
	return t
}

func clusterTemplate(mutate func(t *infrav1.KubevirtClusterTemplate)) client.Object {
	t := &infrav1.KubevirtClusterTemplate{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace}}
	mutate(t)
	return t
}

const (
	vmSpec   = "spec.virtualMachineTemplate.spec"
	vmiSpec  = vmSpec + ".template.spec"
	disks    = vmiSpec + ".domain.devices.disks"
	ifaces   = vmiSpec + ".domain.devices.interfaces"
	networks = vmiSpec + ".networks"
	dvt      = vmSpec + ".dataVolumeTemplates[0]"
)

// expectInvalid checks err is an Invalid API error with a cause at field
// that says what is wrong.
func expectInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a rejection at %s", field)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error at %s, got %v", field, err)
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		fields = append(fields, c.Field)
		if c.Field == field && c.Message != "" {
			return
		}
	}
	t.Fatalf("rejected, but not at %s; causes at %v: %v", field, fields, err)
}

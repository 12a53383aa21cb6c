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
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// vmCase is a VM spec, as the base spec changed by mutate, and whether
// KubeVirt accepts it.
type vmCase struct {
	name   string
	mutate func(vm *kubevirtv1.VirtualMachineSpec)
	valid  bool
}

// onVMI changes the VM's instance template.
func onVMI(mutate func(s *kubevirtv1.VirtualMachineInstanceSpec)) func(*kubevirtv1.VirtualMachineSpec) {
	return func(vm *kubevirtv1.VirtualMachineSpec) { mutate(&vm.Template.Spec) }
}

// withDataVolumeTemplate boots from a DataVolume template instead of the
// container disk.
func withDataVolumeTemplate(mutate func(t *kubevirtv1.DataVolumeTemplateSpec)) func(*kubevirtv1.VirtualMachineSpec) {
	return func(vm *kubevirtv1.VirtualMachineSpec) {
		vm.Template.Spec.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root-dv"}}
		t := kubevirtv1.DataVolumeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "root-dv"},
			Spec: cdiv1.DataVolumeSpec{
				Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: ptr.To("docker://quay.io/containerdisks/ubuntu:22.04")}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
			},
		}
		mutate(&t)
		vm.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{t}
	}
}

func multusNetwork(name, nad string, isDefault bool) kubevirtv1.Network {
	return kubevirtv1.Network{Name: name, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: nad, Default: isDefault}}}
}

func bridge(name string) kubevirtv1.Interface {
	return kubevirtv1.Interface{Name: name, InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}
}

// withInstancetype sizes the VM by the test's cluster instance type.
func withInstancetype(vm *kubevirtv1.VirtualMachineSpec) {
	vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: "VirtualMachineClusterInstancetype", Name: "agreement-small"}
	vm.Template.Spec.Domain.CPU, vm.Template.Spec.Domain.Memory = nil, nil
}

// agreementCases are VM specs on which the provider's webhook and KubeVirt's
// virt-api must agree.
var agreementCases = []vmCase{
	{"the base spec", func(*kubevirtv1.VirtualMachineSpec) {}, true},
	{"runStrategy Halted", func(vm *kubevirtv1.VirtualMachineSpec) { vm.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted) }, true},
	{"runStrategy RerunOnFailure", func(vm *kubevirtv1.VirtualMachineSpec) { vm.RunStrategy = ptr.To(kubevirtv1.RunStrategyRerunOnFailure) }, true},
	{"running and runStrategy", func(vm *kubevirtv1.VirtualMachineSpec) { vm.Running = ptr.To(true) }, false},
	// The provider defaults runStrategy to Always, as the community
	// provider's manifests expect.
	{"neither running nor runStrategy", func(vm *kubevirtv1.VirtualMachineSpec) { vm.RunStrategy = nil }, true},
	{"an unknown runStrategy", func(vm *kubevirtv1.VirtualMachineSpec) {
		vm.RunStrategy = ptr.To(kubevirtv1.VirtualMachineRunStrategy("Sometimes"))
	}, false},
	{"a volume without a disk", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks = nil }), true},
	{"a disk without a volume", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "data"})
	}), false},
	{"two disks of one name", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, s.Domain.Devices.Disks[0])
	}), false},
	{"two volumes of one name", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "root", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
	}), false},
	{"a volume with two sources", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Volumes[0].EmptyDisk = &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}
	}), false},
	{"unique boot orders", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks[0].BootOrder = ptr.To[uint](1)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "scratch", BootOrder: ptr.To[uint](2)})
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
	}), true},
	{"boot order 0", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks[0].BootOrder = ptr.To[uint](0) }), false},
	{"a boot order used twice", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks[0].BootOrder = ptr.To[uint](1)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "scratch", BootOrder: ptr.To[uint](1)})
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
	}), false},
	{"an IDE disk", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks[0].Disk.Bus = "ide" }), false},
	{"a SATA disk", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks[0].Disk.Bus = kubevirtv1.DiskBusSATA
	}), true},
	{"a DataVolume template from a registry", withDataVolumeTemplate(func(*kubevirtv1.DataVolumeTemplateSpec) {}), true},
	{"a DataVolume template from a DataSource", withDataVolumeTemplate(func(t *kubevirtv1.DataVolumeTemplateSpec) {
		t.Spec.Source = nil
		// In the VM's namespace: one of another namespace is KubeVirt-valid
		// but refused by the multi-tenancy policy (guest-clone-source).
		t.Spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "ubuntu"}
	}), true},
	{"a DataVolume template nothing uses", func(vm *kubevirtv1.VirtualMachineSpec) {
		withDataVolumeTemplate(func(*kubevirtv1.DataVolumeTemplateSpec) {})(vm)
		vm.DataVolumeTemplates[0].Name = "orphan"
	}, false},
	{"a DataVolume template without a name", withDataVolumeTemplate(func(t *kubevirtv1.DataVolumeTemplateSpec) { t.Name = "" }), false},
	{"a DataVolume template in another namespace", withDataVolumeTemplate(func(t *kubevirtv1.DataVolumeTemplateSpec) { t.Namespace = "elsewhere" }), false},
	{"a DataVolume template with pvc and storage", withDataVolumeTemplate(func(t *kubevirtv1.DataVolumeTemplateSpec) {
		t.Spec.PVC = &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}
	}), false},
	{"a DataVolume template with neither pvc nor storage", withDataVolumeTemplate(func(t *kubevirtv1.DataVolumeTemplateSpec) { t.Spec.Storage = nil }), false},
	{"masquerade on the pod network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Interfaces[0].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
	}), true},
	{"a secondary Multus network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = append(s.Networks, multusNetwork("storage", "storage-net", false))
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, bridge("storage"))
	}), true},
	{"a default Multus network instead of the pod network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = []kubevirtv1.Network{multusNetwork("default", "vlan-10", true)}
	}), true},
	{"an interface without a network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, bridge("nowhere"))
	}), false},
	{"a network without an interface", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = append(s.Networks, multusNetwork("storage", "storage-net", false))
	}), false},
	{"two pod networks", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = append(s.Networks, kubevirtv1.Network{Name: "second", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}})
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, bridge("second"))
	}), false},
	{"a pod network and a default Multus network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = append(s.Networks, multusNetwork("vlan", "vlan-10", true))
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, bridge("vlan"))
	}), false},
	{"masquerade on a Multus network", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Networks = append(s.Networks, multusNetwork("storage", "storage-net", false))
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, kubevirtv1.Interface{Name: "storage",
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}})
	}), false},
	// KubeVirt 1.7 takes an interface with two binding methods, or none.
	{"an interface with two binding methods", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Interfaces[0].Masquerade = &kubevirtv1.InterfaceMasquerade{}
	}), true},
	{"an interface with a binding plugin and a method", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Interfaces[0].Binding = &kubevirtv1.PluginBinding{Name: "passt"}
	}), false},
	{"an interface without a binding", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Interfaces[0].Bridge = nil
	}), true},
	{"an instance type", withInstancetype, true},
	{"an instance type and CPU cores", func(vm *kubevirtv1.VirtualMachineSpec) {
		withInstancetype(vm)
		vm.Template.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 2}
	}, false},
	{"an instance type and guest memory", func(vm *kubevirtv1.VirtualMachineSpec) {
		withInstancetype(vm)
		vm.Template.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))}
	}, false},
	{"an instance type and a memory request", func(vm *kubevirtv1.VirtualMachineSpec) {
		withInstancetype(vm)
		vm.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	}, false},
	{"memory as a request", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = nil
		s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	}), true},
	{"no memory at all", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Memory = nil }), false},
	// Headroom for in-place updates (docs/in-place-updates.md): KubeVirt
	// checks the maxima a VM sets under its default LiveUpdate rollout.
	{"sockets within maxSockets", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.CPU = &kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1, MaxSockets: 4}
	}), true},
	{"sockets beyond maxSockets", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.CPU = &kubevirtv1.CPU{Sockets: 6, Cores: 1, Threads: 1, MaxSockets: 4}
	}), false},
	{"guest memory within maxGuest", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("2Gi")), MaxGuest: ptr.To(resource.MustParse("8Gi"))}
	}), true},
	{"guest memory beyond maxGuest", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("8Gi")), MaxGuest: ptr.To(resource.MustParse("4Gi"))}
	}), false},
	{"guest memory under 1Gi with maxGuest", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("512Mi")), MaxGuest: ptr.To(resource.MustParse("2Gi"))}
	}), false},
	{"guest memory off the 2Mi steps with maxGuest", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1025Mi")), MaxGuest: ptr.To(resource.MustParse("4Gi"))}
	}), false},
	{"guest memory off the 2Mi steps without maxGuest", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1025Mi"))}
	}), true},
	{"a label KubeVirt reserves on the template", func(vm *kubevirtv1.VirtualMachineSpec) {
		vm.Template.ObjectMeta.Labels = map[string]string{kubevirtv1.NodeNameLabel: "infra-a"}
	}, false},
	{"a label of the user's own on the template", func(vm *kubevirtv1.VirtualMachineSpec) {
		vm.Template.ObjectMeta.Labels = map[string]string{"team": "platform"}
	}, true},
	{"a guest agent readiness probe", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.ReadinessProbe = &kubevirtv1.Probe{Handler: kubevirtv1.Handler{GuestAgentPing: &kubevirtv1.GuestAgentPing{}}}
	}), true},
	{"a probe with two handlers", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.ReadinessProbe = &kubevirtv1.Probe{Handler: kubevirtv1.Handler{GuestAgentPing: &kubevirtv1.GuestAgentPing{},
			Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	}), false},
	{"a valid hostname", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Hostname = "node-1" }), true},
	{"an invalid hostname", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Hostname = "Node_1" }), false},
	{"evictionStrategy LiveMigrate", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategyLiveMigrate)
	}), true},
	{"an unknown evictionStrategy", onVMI(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategy("Sometimes"))
	}), false},
}

// TestAdmissionAgreesWithVirtAPI runs one table of VM specs through the
// provider's webhook (as a KubevirtMachine's VM template) and through the
// real virt-api (kubeVirtVerdict, on the spec the provider accepted, with
// its defaults, else the one it refused), all as dry runs: the provider
// refuses early, on the management cluster, exactly what KubeVirt would
// refuse later on the infra cluster, and nothing it would accept.
func TestAdmissionAgreesWithVirtAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	it := &instancetypev1beta1.VirtualMachineClusterInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "agreement-small"},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{CPU: instancetypev1beta1.CPUInstancetype{Guest: 2},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")}},
	}
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, it))).To(Succeed())
	// docs/validation.md states how many specs agree.
	g.Expect(agreementCases).To(HaveLen(55))
	var wrong []string
	for i, tc := range agreementCases {
		spec := validVMSpec()
		tc.mutate(&spec)
		km := &infrav1.KubevirtMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agreement-%d", i), Namespace: testNamespace},
			Spec:       infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: *spec.DeepCopy()}},
		}
		providerErr := env.Client.Create(ctx, km, client.DryRunAll)
		if providerErr == nil {
			// What the provider accepted, with its defaults, is what it
			// will give KubeVirt.
			spec = km.Spec.VirtualMachineTemplate.Spec
		}
		virtAPIErr := kubeVirtVerdict(ctx, km.Name, spec)
		if (providerErr == nil) != (virtAPIErr == nil) || (virtAPIErr == nil) != tc.valid {
			wrong = append(wrong, fmt.Sprintf("%s (want valid=%t): the provider says %s; virt-api says %s",
				tc.name, tc.valid, errOrAccepted(providerErr), errOrAccepted(virtAPIErr)))
		}
	}
	g.Expect(wrong).To(BeEmpty())
}

// kubeVirtVerdict asks the real virt-api about a VM spec, as dry runs:
// first the VirtualMachine; then, as virt-controller would create it when
// the VM starts, the VirtualMachineInstance of its template (virt-api
// checks some rules, such as memory, only there). A VM sized by an instance
// type gets its CPU and memory only from virt-controller, so its template
// alone is not a VMI.
func kubeVirtVerdict(ctx context.Context, name string, spec kubevirtv1.VirtualMachineSpec) error {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Spec: *spec.DeepCopy()}
	if err := env.Client.Create(ctx, vm, client.DryRunAll); err != nil || spec.Instancetype != nil {
		return err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: spec.Template.ObjectMeta.Labels},
		Spec:       *spec.Template.Spec.DeepCopy(),
	}
	return env.Client.Create(ctx, vmi, client.DryRunAll)
}

func errOrAccepted(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

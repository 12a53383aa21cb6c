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

package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// TestInstancetype checks a VM whose size comes from an instance type passes
// KubeVirt's conflict checks and runs: the provider adds no CPU or memory of
// its own (docs/kubevirt-behaviour.md#instance-types-own-cpu-and-memory).
func TestInstancetype(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	g.Expect(w.Env.Client.Create(ctx, &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "u1.small", Namespace: tc.ns},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 1},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")},
		},
	})).To(Succeed())
	km := tc.newMachine(t, fixture.MachineOptions{Name: "typed-0", Mutate: func(km *infrav1.KubevirtMachine) {
		s := &km.Spec.VirtualMachineTemplate.Spec
		s.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: "VirtualMachineInstancetype", Name: "u1.small"}
		s.Template.Spec.Domain.CPU, s.Template.Spec.Domain.Memory = nil, nil
		km.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyGuestAgent
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(vm.Spec.Template.Spec.Domain.CPU).To(BeNil())
	g.Expect(vm.Spec.Template.Spec.Domain.Memory).To(BeNil())
}

// TestNodeAddressNetwork checks that with a Multus network chosen as the
// node network, its address is the machine's first InternalIP.
func TestNodeAddressNetwork(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	tc.bridgeNetwork(t, "tenant-vlan", 10)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "multus-0", Mutate: func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork(),
			{Name: "tenant", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "tenant-vlan"}}}}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultBridgeNetworkInterface(),
			{Name: "tenant", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
		km.Spec.NodeAddressNetwork = "tenant"
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, func() []eventsv1.Event { return machineEventList(t, tc, km) }).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeNormal), HaveField("Reason", "Provisioned"),
		HaveField("Note", "VirtualMachine "+tc.ns+"/"+km.Name+" on the management cluster runs and its bootstrap succeeded"))),
		"the Event of a provisioned machine names its VM and infra cluster")
	addrs := get(t, tc.c, km).Status.Addresses
	g.Expect(addrs).To(HaveLen(4))
	g.Expect(addrs[0].Type).To(Equal(clusterv1.MachineInternalIP))
	g.Expect(addrs[0].Address).To(HavePrefix("192.168."), "the Multus address comes first")
	g.Expect(addrs[1].Address).To(HavePrefix("10.244."))
}

// TestUnschedulableAndEvents checks a VM no node can take is reported with
// the scheduler's own words, and that transitions are recorded as Events.
func TestUnschedulableAndEvents(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "huge-0", Mutate: func(km *infrav1.KubevirtMachine) {
		huge := resource.MustParse("512Gi")
		km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = &huge
	}})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.UnschedulableReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("Insufficient memory"))

	eventually(t, func() []string { return machineEvents(t, tc, km) }).Should(ContainElement(infrav1.UnschedulableReason))
	g.Expect(machineEvents(t, tc, km)).NotTo(ContainElement("VirtualMachineCreated"), "creating the VM is no Event of its own: the condition shows it")
}

// TestShortOfGPUsIsNamed checks a machine whose VM waits for a GPU no
// infra node has free says so, naming the resource and how many are free,
// rather than a generic Unschedulable, and runs once one is freed
// (docs/gpus.md#when-the-devices-run-out).
func TestShortOfGPUsIsNamed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	node := addInfraNode(t, "infra-gpu", map[corev1.ResourceName]int64{testenv.GPUResource: 1})
	gpuMachine := func(name string) *infrav1.KubevirtMachine {
		return tc.newMachine(t, fixture.MachineOptions{Name: name, Mutate: func(km *infrav1.KubevirtMachine) {
			spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
			spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "gpu0", DeviceName: testenv.GPUResource}}
			spec.Tolerations = []corev1.Toleration{{Key: doomedTaint.Key, Operator: corev1.TolerationOpExists}}
			km.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyGuestAgent
		}})
	}
	first := gpuMachine("gpu-0")
	eventually(t, tc.provisioned(first)).Should(Succeed())
	second := gpuMachine("gpu-1")
	eventually(t, tc.reason(second, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.InsufficientDevicesReason))
	g.Expect(condition(get(t, tc.c, second), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring(
		"1 " + testenv.GPUResource + " (0 of 1 free on 1 infra nodes)"))
	eventually(t, func() []string { return machineEvents(t, tc, second) }).Should(ContainElement(infrav1.InsufficientDevicesReason))
	waiting := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, second.Name, waiting)).To(Succeed())

	g.Expect(tc.c.Delete(ctx, first)).To(Succeed())
	eventually(t, tc.provisioned(second)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, second.Name, vmi)).To(Succeed())
	g.Expect(vmi.Status.NodeName).To(Equal(node))
	running := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, second.Name, running)).To(Succeed())
	g.Expect(running.UID).To(Equal(waiting.UID), "the VM that waited for a GPU is the one that runs: the provider did not recreate it")
	// The node goes when the test ends, once no VM is left on it.
	g.Expect(tc.c.Delete(ctx, second)).To(Succeed())
}

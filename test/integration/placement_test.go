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
	"fmt"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// hostsOf lists the infra node of each named VM instance, once every one is
// scheduled.
func hostsOf(ns string, names ...string) func() ([]string, error) {
	return func() ([]string, error) {
		var hosts []string
		for _, n := range names {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := w.Env.Client.Get(context.Background(), keyOf(ns, n), vmi); err != nil {
				return nil, err
			}
			if vmi.Status.NodeName == "" {
				return nil, fmt.Errorf("%s is not scheduled yet (%s)", n, vmi.Status.Phase)
			}
			hosts = append(hosts, vmi.Status.NodeName)
		}
		return hosts, nil
	}
}

// TestHardAntiAffinityControlPlane: three control-plane VMs with hard
// anti-affinity land on the world's three infra hosts; a fourth cannot
// schedule, and its machine carries the scheduler's reason.
func TestHardAntiAffinityControlPlane(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	hard := func(km *infrav1.KubevirtMachine) { km.Spec.Placement.PodAntiAffinityPreset = infrav1.PresetHard }
	var names []string
	var machines []*infrav1.KubevirtMachine
	for i := range 3 {
		km := tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("cp-%d", i), ControlPlane: true, Mutate: hard})
		names, machines = append(names, km.Name), append(machines, km)
	}
	var hosts []string
	eventually(t, func() error {
		var err error
		hosts, err = hostsOf(tc.ns, names...)()
		return err
	}).Should(Succeed())
	sort.Strings(hosts)
	g.Expect(hosts).To(HaveLen(3))
	g.Expect(hosts[0]).NotTo(Equal(hosts[1]))
	g.Expect(hosts[1]).NotTo(Equal(hosts[2]))
	for _, km := range machines {
		eventually(t, tc.provisioned(km)).Should(Succeed())
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, names[0], vmi)).To(Succeed())
	g.Expect(vmi.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

	fourth := tc.newMachine(t, fixture.MachineOptions{Name: "cp-3", ControlPlane: true, Mutate: hard})
	eventually(t, tc.reason(fourth, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.UnschedulableReason))
	msg := conditions.Get(get(t, tc.c, fourth), infrav1.VirtualMachineReadyCondition).Message
	g.Expect(msg).To(ContainSubstring("anti-affinity"), "the scheduler's own message")
	g.Expect(msg).To(ContainSubstring("0/3 nodes are available"))
}

// TestDefaultSpreadOverHosts: six workers of one MachineDeployment, with
// nothing set, spread 2/2/2 over the three infra hosts.
func TestDefaultSpreadOverHosts(t *testing.T) {
	tc := newTenantCluster(t, nil)
	var names []string
	for i := range 6 {
		km := tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("md-0-%d", i), MachineDeployment: "md-0"})
		names = append(names, km.Name)
	}
	eventually(t, func() (map[string]int, error) {
		hosts, err := hostsOf(tc.ns, names...)()
		if err != nil {
			return nil, err
		}
		perHost := map[string]int{}
		for _, h := range hosts {
			perHost[h]++
		}
		return perHost, nil
	}).Should(Equal(map[string]int{"infra-a": 2, "infra-b": 2, "infra-c": 2}))
	vmi := &kubevirtv1.VirtualMachineInstance{}
	NewWithT(t).Expect(infraGet(t, w.Env.Client, tc.ns, names[0], vmi)).To(Succeed())
	NewWithT(t).Expect(vmi.Spec.TopologySpreadConstraints).To(HaveLen(1))
	// KubeVirt copies the constraint to the launcher pod, where the
	// scheduler reads it.
	pods := &corev1.PodList{}
	NewWithT(t).Expect(w.Env.Client.List(context.Background(), pods, client.InNamespace(tc.ns),
		client.MatchingLabels{infrav1.VMNameLabel: names[0]})).To(Succeed())
	NewWithT(t).Expect(pods.Items).NotTo(BeEmpty())
	NewWithT(t).Expect(pods.Items[0].Spec.TopologySpreadConstraints).To(Equal(vmi.Spec.TopologySpreadConstraints))
}

// TestInstancetypesAndPresets: the shipped instance types size a template
// and a VM, and the performance preset reaches the launcher pod.
func TestInstancetypesAndPresets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(world.InstallInstancetypes(ctx, w.Env.Client)).To(Succeed())
	tc := newTenantCluster(t, nil)

	standard := func(name string) kubevirtv1.VirtualMachineSpec {
		vm := fixture.SmallVM()
		vm.Template.Spec.Domain.CPU, vm.Template.Spec.Domain.Memory = nil, nil
		vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: "VirtualMachineClusterInstancetype", Name: name}
		vm.Preference = &kubevirtv1.PreferenceMatcher{Kind: "VirtualMachineClusterPreference", Name: "sockets-advantage"}
		return vm
	}
	tmpl := &infrav1.KubevirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "standard-4", Namespace: tc.ns},
		Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: infrav1.KubevirtMachineSpec{
			VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: standard("standard-4")}}}},
	}
	g.Expect(w.Env.Client.Create(ctx, tmpl)).To(Succeed())
	eventually(t, func() string {
		cur := get(t, w.Env.Client, tmpl)
		return fmt.Sprintf("cpu=%s memory=%s", cur.Status.Capacity.Cpu(), cur.Status.Capacity.Memory())
	}).Should(Equal("cpu=4 memory=16Gi"))

	// A VM of standard-2 with the preference gets its vCPUs as sockets.
	small := tc.newMachine(t, fixture.MachineOptions{Name: "standard-2", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.VirtualMachineTemplate.Spec = standard("standard-2")
	}})
	eventually(t, tc.provisioned(small)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, small.Name, vmi)).To(Succeed())
	g.Expect(vmi.Spec.Domain.CPU.Sockets).To(BeEquivalentTo(2))
	g.Expect(vmi.Spec.Domain.Memory.Guest.String()).To(Equal("8Gi"))

	// The performance preset: dedicated CPUs and hugepages, and a
	// Guaranteed launcher pod.
	fast := tc.newMachine(t, fixture.MachineOptions{Name: "fast", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.Preset = &infrav1.PresetSpec{Name: infrav1.PresetPerformance}
	}})
	eventually(t, tc.provisioned(fast)).Should(Succeed())
	g.Expect(infraGet(t, w.Env.Client, tc.ns, fast.Name, vmi)).To(Succeed())
	g.Expect(vmi.Spec.Domain.CPU.DedicatedCPUPlacement).To(BeTrue())
	g.Expect(vmi.Spec.Domain.Memory.Hugepages).NotTo(BeNil())
	pods := &corev1.PodList{}
	g.Expect(w.Env.Client.List(ctx, pods, client.InNamespace(tc.ns), client.MatchingLabels{infrav1.VMNameLabel: fast.Name})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	g.Expect(pods.Items[0].Status.QOSClass).To(Equal(corev1.PodQOSGuaranteed))
	g.Expect(pods.Items[0].Spec.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceName("hugepages-2Mi")))
}

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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// createNAD creates a NetworkAttachmentDefinition on the infra cluster.
func createNAD(t *testing.T, ns, name, config string, annotations map[string]string) {
	t.Helper()
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(ns)
	nad.SetName(name)
	nad.SetAnnotations(annotations)
	g := NewWithT(t)
	g.Expect(unstructured.SetNestedField(nad.Object, config, "spec", "config")).To(Succeed())
	g.Expect(client.IgnoreAlreadyExists(w.Env.Client.Create(context.Background(), nad))).To(Succeed())
}

// nadConfig reads a NetworkAttachmentDefinition's config, or the error.
func nadConfig(ns, name string) func() string {
	return func() string {
		nad := &unstructured.Unstructured{}
		nad.SetAPIVersion("k8s.cni.cncf.io/v1")
		nad.SetKind("NetworkAttachmentDefinition")
		if err := w.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, nad); err != nil {
			return err.Error()
		}
		config, _, _ := unstructured.NestedString(nad.Object, "spec", "config")
		return config
	}
}

// clusterCondition reads "Reason: message" of a KubevirtCluster condition.
func (tc *tenantCluster) clusterCondition(condType string) func() string {
	return func() string {
		kc := &infrav1.KubevirtCluster{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(tc.kc), kc); err != nil {
			return err.Error()
		}
		c := conditions.Get(kc, condType)
		if c == nil {
			return "no " + condType
		}
		return c.Reason + ": " + c.Message
	}
}

// vlanTemplate is an administrator's per-cluster network template with two
// VLANs to give out.
func vlanTemplate(t *testing.T) infrav1.NamespacedRef {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "net-templates-"}}
	NewWithT(t).Expect(w.Env.Client.Create(context.Background(), ns)).To(Succeed())
	createNAD(t, ns.Name, "vlan-bridge",
		`{"cniVersion":"0.3.1","type":"bridge","bridge":"br-tenants","vlan":{{ .VLANID }},"name":"{{ .Namespace }}-{{ .ClusterName }}"}`,
		map[string]string{infrav1.VLANRangeAnnotation: "100-101", "k8s.v1.cni.cncf.io/resourceName": "bridge.network/br-tenants"})
	return infrav1.NamespacedRef{Namespace: ns.Name, Name: "vlan-bridge"}
}

func TestPerClusterVLANNetworks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tmpl := vlanTemplate(t)
	withVLAN := func(id *int32) func(*infrav1.KubevirtCluster) {
		return func(kc *infrav1.KubevirtCluster) {
			kc.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: tmpl, VLANID: id}
		}
	}
	first := ownedCluster(t, withVLAN(nil))
	eventually(t, first.clusterCondition(infrav1.NetworksReadyCondition)).Should(HavePrefix(infrav1.CreatedReason))
	second := ownedCluster(t, withVLAN(nil))
	eventually(t, second.clusterCondition(infrav1.NetworksReadyCondition)).Should(HavePrefix(infrav1.CreatedReason))

	vlans := map[int32]bool{}
	for _, tc := range []*tenantCluster{first, second} {
		// Cluster API's patch helper writes conditions before the rest of
		// status, so the network's name may land just after Created.
		eventually(t, func() string { return get(t, tc.c, tc.kc).Status.Network.PerCluster }).Should(Equal(tc.ns + "/tenant-tenant"))
		kc := get(t, tc.c, tc.kc)
		vlans[kc.Status.Network.VLANID] = true
		g.Expect(nadConfig(tc.ns, "tenant-tenant")()).To(Equal(fmt.Sprintf(
			`{"cniVersion":"0.3.1","type":"bridge","bridge":"br-tenants","vlan":%d,"name":"%s-tenant"}`, kc.Status.Network.VLANID, tc.ns)))
	}
	g.Expect(vlans).To(Equal(map[int32]bool{100: true, 101: true}), "each cluster gets a VLAN of its own")

	// A network deleted by hand comes back with the same VLAN.
	secondVLAN := get(t, second.c, second.kc).Status.Network.VLANID
	before := nadConfig(second.ns, "tenant-tenant")()
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(second.ns)
	nad.SetName("tenant-tenant")
	g.Expect(w.Env.Client.Delete(ctx, nad)).To(Succeed())
	eventually(t, nadConfig(second.ns, "tenant-tenant")).Should(Equal(before))
	g.Expect(get(t, second.c, second.kc).Status.Network.VLANID).To(Equal(secondVLAN))

	// The range is used up; an explicit VLAN another cluster has is refused.
	third := ownedCluster(t, withVLAN(nil))
	eventually(t, third.clusterCondition(infrav1.NetworksReadyCondition)).Should(Equal(
		infrav1.VLANUnavailableReason + ": every VLAN in 100-101 is in use"))
	g.Expect(ptr.Deref(get(t, third.c, third.kc).Status.Initialization.Provisioned, false)).To(BeFalse(),
		"no VM may start before the cluster's network exists")
	taken := get(t, first.c, first.kc).Status.Network.VLANID
	fourth := ownedCluster(t, withVLAN(&taken))
	eventually(t, fourth.clusterCondition(infrav1.NetworksReadyCondition)).Should(Equal(fmt.Sprintf(
		"%s: VLAN %d is used by %s/tenant-tenant", infrav1.VLANUnavailableReason, taken, first.ns)))

	// The fourth asked for the first's VLAN by number; gone, it cannot race
	// the third for it when the first frees it below.
	g.Expect(fourth.c.Delete(ctx, fourth.kc)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(fourth.c.Get(ctx, client.ObjectKeyFromObject(fourth.kc), &infrav1.KubevirtCluster{}))
	}).Should(BeTrue())

	// Machines get the network; the first cluster's deletion frees its
	// VLAN for the third, without polling.
	km := first.newMachine(t, fixture.MachineOptions{Name: "vlan-0"})
	eventually(t, first.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, first.ns, km.Name, vm)).To(Succeed())
	g.Expect(vmbuilder.NetworkSummary(vm.Spec.Template.Spec)).To(Equal([]string{"default:pod:masquerade", "tenant:" + first.ns + "/tenant-tenant:bridge"}))
	g.Expect(first.c.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool { return apierrors.IsNotFound(first.c.Get(ctx, client.ObjectKeyFromObject(km), km)) }).Should(BeTrue())
	g.Expect(first.c.Delete(ctx, first.kc)).To(Succeed())
	eventually(t, nadConfig(first.ns, "tenant-tenant")).Should(ContainSubstring("not found"))
	eventually(t, third.clusterCondition(infrav1.NetworksReadyCondition)).Should(Equal(fmt.Sprintf(
		"%s: NetworkAttachmentDefinition %s/tenant-tenant carries VLAN %d", infrav1.CreatedReason, third.ns, taken)))
}

func TestMultusNetworksAndDNS(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Network.Networks = []infrav1.MultusNetwork{{Name: "storage", NetworkAttachmentDefinition: "storage-net"}}
		kc.Spec.Network.NodeAddressNetwork = "storage"
		kc.Spec.DNSPolicy = corev1.DNSNone
		kc.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.53.0.10"}, Searches: []string{"tenant.internal"}}
	})
	createNAD(t, tc.ns, "storage-net", `{"cniVersion":"0.3.1","type":"bridge","bridge":"br-storage"}`, nil)
	createNAD(t, tc.ns, "fast-net", `{"cniVersion":"0.3.1","type":"sriov"}`, nil)
	worker := tc.newMachine(t, fixture.MachineOptions{Name: "net-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.Networks = []infrav1.MultusNetwork{{Name: "fast", NetworkAttachmentDefinition: "fast-net", Binding: infrav1.BindingSRIOV}}
	}})
	own := tc.newMachine(t, fixture.MachineOptions{Name: "net-1", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.VirtualMachineTemplate.Spec.Template.Spec.DNSPolicy = corev1.DNSDefault
	}})
	for _, km := range []*infrav1.KubevirtMachine{worker, own} {
		eventually(t, tc.provisioned(km)).Should(Succeed())
	}
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, worker.Name, vm)).To(Succeed())
	g.Expect(vmbuilder.NetworkSummary(vm.Spec.Template.Spec)).To(Equal([]string{"default:pod:masquerade", "storage:storage-net:bridge", "fast:fast-net:sriov"}))
	g.Expect(vm.Spec.Template.Spec.DNSPolicy).To(Equal(corev1.DNSNone))
	g.Expect(vm.Spec.Template.Spec.DNSConfig.Nameservers).To(Equal([]string{"10.53.0.10"}))
	addrs := get(t, tc.c, worker).Status.Addresses
	g.Expect(addrs[0].Type).To(Equal(clusterv1.MachineInternalIP))
	g.Expect(addrs[0].Address).To(HavePrefix("192.168."), "the cluster's node address network comes first")

	g.Expect(infraGet(t, w.Env.Client, tc.ns, own.Name, vm)).To(Succeed())
	g.Expect(vm.Spec.Template.Spec.DNSPolicy).To(Equal(corev1.DNSDefault), "the machine's own DNS policy wins")
	g.Expect(vm.Spec.Template.Spec.DNSConfig).To(BeNil())
}

func TestMultusPrimaryNetwork(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Network.Networks = []infrav1.MultusNetwork{{Name: "vlan", NetworkAttachmentDefinition: "vlan-10", Primary: true}}
	})
	createNAD(t, tc.ns, "vlan-10", `{"cniVersion":"0.3.1","type":"bridge","bridge":"br0","vlan":10}`, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "primary-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(vmbuilder.NetworkSummary(vm.Spec.Template.Spec)).To(Equal([]string{"vlan:vlan-10(default):bridge"}), "no pod network")
	addrs := get(t, tc.c, km).Status.Addresses
	g.Expect(addrs[0].Address).To(HavePrefix("192.168."))

	// A machine whose template has a pod network cannot take a primary one.
	bad := tc.newMachine(t, fixture.MachineOptions{Name: "primary-1", Mutate: func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultBridgeNetworkInterface()}
	}})
	eventually(t, tc.reason(bad, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.CreateFailedReason))
	g.Expect(condition(get(t, tc.c, bad), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring(`network "vlan" is primary`))
}

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestStaticAddressesFromPool runs machines whose VLAN network takes its
// addresses from an InClusterIPPool of three addresses, answered by the
// real in-cluster IPAM provider: each VM's guest (cloud-init or Ignition)
// configures its pool address,
// the machine and the tenant Node report it, a third machine waits naming
// the pool and creates no VM, and deleting a machine returns its address,
// which the waiting machine then gets.
func TestStaticAddressesFromPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	tc.bridgeNetwork(t, "tenant-vlan", 30)
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("ipam.cluster.x-k8s.io/v1alpha2")
	pool.SetKind("InClusterIPPool")
	pool.SetNamespace(tc.ns)
	pool.SetName("tenant-pool")
	g.Expect(unstructured.SetNestedField(pool.Object, map[string]any{
		"addresses": []any{"192.168.30.10-192.168.30.12"}, "prefix": int64(24), "gateway": "192.168.30.1"}, "spec")).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, pool)).To(Succeed())

	// A workload cluster for the first machine's guest to join.
	key := tc.reachable(t)

	withPool := func(km *infrav1.KubevirtMachine) {
		spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
		spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork(),
			{Name: "tenant", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "tenant-vlan"}}}}
		spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{
			{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}},
			{Name: "tenant", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
		km.Spec.NodeAddressNetwork = "tenant"
		km.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant", Nameservers: []string{"192.168.30.53"},
			AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "tenant-pool"}}}}
	}
	cp := tc.newMachine(t, fixture.MachineOptions{Name: "static-cp-0", ControlPlane: true, Mutate: withPool})
	md := tc.newMachine(t, fixture.MachineOptions{Name: "static-md-0", Mutate: withPool})
	flatcar := tc.newMachine(t, fixture.MachineOptions{Name: "static-flatcar-0", Format: "ignition", Data: ignitionConfig,
		Mutate: func(km *infrav1.KubevirtMachine) { withPool(km); bootFlatcar(km) }})
	eventually(t, tc.provisioned(cp)).Should(Succeed())
	eventually(t, tc.provisioned(md)).Should(Succeed())
	eventually(t, tc.provisioned(flatcar)).Should(Succeed())

	taken := map[string]string{}
	for _, km := range []*infrav1.KubevirtMachine{cp, md, flatcar} {
		claim := &ipamv1.IPAddressClaim{}
		g.Expect(tc.c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: ipam.ClaimName(km.Name, "tenant", 0)}, claim)).To(Succeed())
		g.Expect(metav1.IsControlledBy(claim, km)).To(BeTrue(), "the machine owns its claim")
		g.Expect(claim.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, tc.cluster.Name))
		g.Expect(claim.Spec.ClusterName).To(Equal(tc.cluster.Name))
		addr := &ipamv1.IPAddress{}
		g.Expect(tc.c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: claim.Status.AddressRef.Name}, addr)).To(Succeed())
		taken[km.Name] = addr.Spec.Address
		// The guest configured it: the machine reports it first.
		addrs := get(t, tc.c, km).Status.Addresses
		g.Expect(addrs).NotTo(BeEmpty())
		g.Expect(addrs[0]).To(Equal(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: addr.Spec.Address}))
		// The VM's interface has the MAC the network config matches.
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
		ifaces := vm.Spec.Template.Spec.Domain.Devices.Interfaces
		g.Expect(ifaces[1].MacAddress).To(Equal(ipam.MAC(tc.ns, km.Name, "tenant")))
		ud := &corev1.Secret{}
		g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name+infrav1.UserDataSecretSuffix, ud)).To(Succeed())
		if km == flatcar {
			g.Expect(ud.Data).NotTo(HaveKey("networkdata"), "Ignition guests get networkd units instead")
			g.Expect(string(ud.Data["userdata"])).To(ContainSubstring("/etc/systemd/network/10-capkv-tenant.network"))
			continue
		}
		nd := string(ud.Data["networkdata"])
		g.Expect(nd).To(ContainSubstring(addr.Spec.Address+"/24"), "network config v2 with the pool's prefix")
		g.Expect(nd).To(ContainSubstring("192.168.30.53"), "the nameserver")
		g.Expect(nd).NotTo(ContainSubstring("192.168.30.1\n"), "the pod network keeps the default route, not the pool's gateway")
		g.Expect(nd).NotTo(ContainSubstring("routes"))
		g.Expect(nd).To(ContainSubstring("dhcp4: true"), "the pod network keeps DHCP")
	}
	g.Expect(taken).To(ConsistOf("192.168.30.10", "192.168.30.11", "192.168.30.12"))
	// The kubelet was told the pool address: the tenant Node reports it.
	eventually(t, func() string {
		n, err := w.Workloads.Node(ctx, key, cp.Name)
		if err != nil {
			return err.Error()
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
		return "no InternalIP"
	}).Should(Equal(taken[cp.Name]))

	// The pool is exhausted: a third machine waits, naming the pool, and
	// creates nothing on the infra cluster.
	extra := tc.newMachine(t, fixture.MachineOptions{Name: "static-md-1", Mutate: withPool})
	eventually(t, tc.reason(extra, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.WaitingForIPAddressReason))
	// The IPAM provider's own reason follows once it has tried.
	eventually(t, func() string { return condition(get(t, tc.c, extra), infrav1.VirtualMachineReadyCondition) }).Should(
		And(ContainSubstring("InClusterIPPool/tenant-pool"), ContainSubstring("the pool is exhausted: no free address, 3 of 3 in use")))
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, extra.Name, &kubevirtv1.VirtualMachine{}))).To(BeTrue())

	// Deleting a machine returns its address, and the waiting one gets it.
	g.Expect(tc.c.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: md.Name}})).To(Succeed())
	g.Expect(client.IgnoreNotFound(tc.c.Delete(ctx, md))).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(tc.c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: ipam.ClaimName(md.Name, "tenant", 0)}, &ipamv1.IPAddressClaim{}))
	}).Should(BeTrue(), "the deleted machine's claim is released")
	eventually(t, tc.provisioned(extra)).Should(Succeed())
	eventually(t, func() string {
		addrs := get(t, tc.c, extra).Status.Addresses
		if len(addrs) == 0 {
			return ""
		}
		return addrs[0].Address
	}).Should(Equal(taken[md.Name]))
}

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

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("The multus-ipam flavor", Ordered, func() {
	ctx := context.Background()
	var ns string
	const name = "ipam"
	md := name + "-md-0"
	pool := name + "-nodes"

	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		ns = newNamespace(ctx, "e2e-ipam-")
		// Three addresses: one control plane and two workers fill it.
		prepareFlavor(ctx, "multus", ns)
		createIPPool(ctx, ns, pool, "192.168.40.10-192.168.40.12")
	})

	It("runs a cluster whose nodes' VLAN addresses come from the pool, each Node reporting its own", func() {
		out, err := cc.RunWithVariables(ctx, map[string]string{"WORKER_MACHINE_COUNT": "2"},
			"generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--flavor", "multus-ipam")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, c, []byte(out))).To(Succeed())
		expectRunning(ctx, ns, name)
		expectDeploymentNodes(ctx, ns, md, 2)
		expectCNIApplied(ctx, ns, name)
		addresses := poolAddresses(ctx, ns)
		Expect(addresses).To(HaveLen(3))
		machines := &clusterv1.MachineList{}
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(HaveLen(3))
		for _, m := range machines.Items {
			node, err := w.Workloads.Node(ctx, types.NamespacedName{Namespace: ns, Name: name}, m.Status.NodeRef.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(internalIP(node)).To(Equal(addresses[m.Spec.InfrastructureRef.Name]), "Node %s reports its pool address", node.Name)
			km := &infrav1.KubevirtMachine{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, km)).To(Succeed())
			Expect(km.Status.Addresses[0].Address).To(Equal(addresses[km.Name]), "the machine reports it first")
		}
	})

	It("leaves a machine the pool has no address for waiting, naming the pool, with nothing created", func() {
		scaleDeployment(ctx, ns, md, 3)
		var waiting string
		Eventually(func() string {
			for _, km := range kubevirtMachines(ctx, ns) {
				if cond := conditions.Get(&km, infrav1.VirtualMachineReadyCondition); cond != nil && cond.Reason == infrav1.WaitingForIPAddressReason {
					waiting = km.Name
					return cond.Message
				}
			}
			return "no machine waits for an address"
		}).WithTimeout(timeout).Should(And(ContainSubstring("InClusterIPPool/"+pool), ContainSubstring("the pool is exhausted")),
			func() string { return describe(ctx, ns) })
		err := w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: waiting}, &kubevirtv1.VirtualMachine{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no VM for the waiting machine: %v", err)
		Expect(poolAddresses(ctx, ns)).To(HaveLen(3))
	})

	It("returns the addresses of the machines a scale-down removes", func() {
		scaleDeployment(ctx, ns, md, 1)
		expectDeploymentNodes(ctx, ns, md, 1)
		Eventually(func() int { return len(poolAddresses(ctx, ns)) }).WithTimeout(timeout).Should(Equal(2))
		Eventually(func() string { return poolUsage(ctx, ns, pool) }).WithTimeout(timeout).Should(Equal("1 of 3 free"))
	})

	It("releases every address when the cluster is deleted", func() {
		deleteCluster(ctx, ns, name)
		Eventually(func() int { return len(poolAddresses(ctx, ns)) }).WithTimeout(timeout).Should(BeZero())
		claims := &ipamv1.IPAddressClaimList{}
		Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		Expect(claims.Items).To(BeEmpty())
	})
})

// poolAddresses maps each machine holding an address from a pool of ns to
// that address.
func poolAddresses(ctx context.Context, ns string) map[string]string {
	claims := &ipamv1.IPAddressClaimList{}
	Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, claim := range claims.Items {
		if claim.Status.AddressRef.Name == "" || len(claim.OwnerReferences) == 0 {
			continue
		}
		addr := &ipamv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, addr); err == nil {
			out[claim.OwnerReferences[0].Name] = addr.Spec.Address
		}
	}
	return out
}

// poolUsage is "<free> of <total> free" from an InClusterIPPool's status.
func poolUsage(ctx context.Context, ns, name string) string {
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("ipam.cluster.x-k8s.io/v1alpha2")
	pool.SetKind("InClusterIPPool")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pool); err != nil {
		return err.Error()
	}
	free, _, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "free")
	total, _, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "total")
	return fmt.Sprintf("%d of %d free", free, total)
}

// internalIP is a Node's InternalIP addresses, sorted and comma-joined.
func internalIP(node *corev1.Node) string {
	var ips []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	sort.Strings(ips)
	return strings.Join(ips, ",")
}

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

package move

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// poolAddressesYAML gives every machine of a generated external-infra
// cluster a VLAN network whose address comes from the pool nodes.
const poolAddressesYAML = `      networks:
      - name: tenant
        networkAttachmentDefinition: tenant-vlan
      nodeAddressNetwork: tenant
      networkAddresses:
      - network: tenant
        addressesFromPools:
        - apiGroup: ipam.cluster.x-k8s.io
          kind: InClusterIPPool
          name: nodes
      virtualMachineBootstrapCheck:
`

// clusterctlMoveLabel makes clusterctl move an object with the clusters
// of its namespace.
const clusterctlMoveLabel = "clusterctl.cluster.x-k8s.io/move"

var _ = Describe("clusterctl move of a cluster with pool addresses", Ordered, func() {
	ctx := context.Background()
	var ns string
	var before map[string]string

	// BeforeSuite applied the cluster, beside the other spec's.
	BeforeAll(func() { ns = pooledNS })

	It("keeps every machine's address through the move", func() {
		expectMachinesWithNodes(ctx, from.Client, ns, 2)
		before = claimedAddresses(ctx, from.Client, ns)
		Expect(before).To(HaveLen(2))
		vms := infraUIDs(ctx, ns)["VirtualMachine"]

		out, err := cc.Run(ctx, "move", "-n", ns, "--kubeconfig", from.Kubeconfig, "--to-kubeconfig", to.Kubeconfig)
		Expect(err).NotTo(HaveOccurred(), out)

		Eventually(func() map[string]string { return claimedAddresses(ctx, from.Client, ns) }).WithTimeout(timeout).Should(BeEmpty(),
			"no claim or address is left on the first management cluster")
		Eventually(func() string {
			kms := &infrav1.KubevirtMachineList{}
			Expect(to.Client.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
			ready := 0
			for i := range kms.Items {
				if conditions.IsTrue(&kms.Items[i], infrav1.ReadyCondition) {
					ready++
				}
			}
			return fmt.Sprintf("%d/%d ready", ready, len(kms.Items))
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("2/2 ready"))
		Eventually(func() map[string]string { return claimedAddresses(ctx, to.Client, ns) }).WithTimeout(timeout).Should(Equal(before),
			"every claim holds the same address on the second management cluster")
		Consistently(func() map[string]string { return claimedAddresses(ctx, to.Client, ns) }).WithTimeout(5 * time.Second).Should(Equal(before))
		Expect(infraUIDs(ctx, ns)["VirtualMachine"]).To(Equal(vms), "no VM was recreated")
	})

	It("gives a machine made after the move an address no moved machine holds", func() {
		scaleTo(ctx, ns, "pooled-md-0", 2)
		expectMachinesWithNodes(ctx, to.Client, ns, 3)
		after := claimedAddresses(ctx, to.Client, ns)
		Expect(after).To(HaveLen(3))
		seen := map[string]bool{}
		for _, a := range after {
			Expect(seen).NotTo(HaveKey(a), "address %s is held twice", a)
			seen[a] = true
		}
	})

	It("returns the addresses when the cluster is deleted on the second management cluster", func() {
		Expect(to.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pooled"}})).To(Succeed())
		Eventually(func() int {
			vms := &kubevirtv1.VirtualMachineList{}
			Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			return len(vms.Items) + len(claimedAddresses(ctx, to.Client, ns))
		}).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero())
	})
})

// claimedAddresses maps each IPAddressClaim of ns to its IPAddress's
// address ("" while it has none).
func claimedAddresses(ctx context.Context, c client.Client, ns string) map[string]string {
	claims := &ipamv1.IPAddressClaimList{}
	Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, claim := range claims.Items {
		out[claim.Name] = ""
		if claim.Status.AddressRef.Name == "" {
			continue
		}
		addr := &ipamv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, addr); err == nil {
			out[claim.Name] = addr.Spec.Address
		}
	}
	return out
}

// applyPooledCluster applies, in a namespace of its own on the first
// management cluster, the cluster whose machines take their addresses from
// a pool of its own, and returns the namespace.
func applyPooledCluster(ctx context.Context) string {
	ns := newTenantNamespace(ctx, "e2e-move-ipam-")
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(ns)
	nad.SetName("tenant-vlan")
	Expect(unstructured.SetNestedField(nad.Object, `{"cniVersion":"0.3.1","type":"bridge","bridge":"br-tenant","vlan":50,"ipam":{}}`, "spec", "config")).To(Succeed())
	Expect(w.Infra.Client.Create(ctx, nad)).To(Succeed())
	out, err := cc.Run(ctx, "generate", "cluster", "pooled", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns,
		"--flavor", "external-infra", "--worker-machine-count", "1")
	Expect(err).NotTo(HaveOccurred())
	Expect(strings.Count(out, "      virtualMachineBootstrapCheck:\n")).To(Equal(2))
	out = strings.ReplaceAll(out, "      virtualMachineBootstrapCheck:\n", poolAddressesYAML)
	// The cluster's own pool, labelled to move with it (docs/ipam.md):
	// an IPAddress is owned by its pool too, and clusterctl moves an
	// object only with all its owners.
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("ipam.cluster.x-k8s.io/v1alpha2")
	pool.SetKind("InClusterIPPool")
	pool.SetNamespace(ns)
	pool.SetName("nodes")
	pool.SetLabels(map[string]string{clusterctlMoveLabel: ""})
	Expect(unstructured.SetNestedField(pool.Object, map[string]any{"addresses": []any{"192.168.50.10-192.168.50.19"}, "prefix": int64(24)}, "spec")).To(Succeed())
	Expect(from.Client.Create(ctx, pool)).To(Succeed())
	Expect(world.ApplyYAML(ctx, from.Client, []byte(out))).To(Succeed())
	return ns
}

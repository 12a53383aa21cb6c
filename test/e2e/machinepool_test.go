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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("The machinepool flavor", Ordered, func() {
	ctx := context.Background()
	var ns string
	const name = "mp"
	pool := name + "-mp-0"

	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		ns = newNamespace(ctx, "e2e-machinepool-")
	})

	vms := func() map[string]types.UID { return poolVMs(ctx, ns, pool) }
	expectMachines := func(n int) { expectPoolMachines(ctx, ns, pool, pool, n) }
	scalePool := func(n int32) {
		Expect(retryWrite(func() error {
			mp := &clusterv1.MachinePool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, mp); err != nil {
				return err
			}
			mp.Spec.Replicas = ptr.To(n)
			return c.Update(ctx, mp)
		})).To(Succeed())
	}

	It("renders with only its defaults and reaches Running", func() {
		out, err := cc.Run(ctx, "generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--flavor", "machinepool")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, c, []byte(out))).To(Succeed())
		expectRunning(ctx, ns, name)
		expectMachines(0)
		expectCNIApplied(ctx, ns, name)
	})

	It("runs a MachinePool of 3 through the real MachinePool and pool controllers", func() {
		scalePool(3)
		expectMachines(3)
		Expect(vms()).To(HaveLen(3))
		Expect(goldenVolumes(ctx, ns)).To(Equal(1), "the pool and the control plane share one golden image")
	})

	// Cluster API's resilience checks on a MachinePool cluster
	// (ownership_test.go): QuickStartSpec waits for no MachinePool, so they
	// run here, on this cluster.
	It("rebuilds the owner references and finalizers of the cluster, its pool and its instances", func() {
		before := vms()
		validateOwnership(ctx, capiSpecs().proxy, ns, name, false)
		expectMachines(3)
		Expect(vms()).To(Equal(before), "no VM recreated")
	})

	It("scales to 5 and back to 2: the highest indexes go, no other VM", func() {
		scalePool(5)
		expectMachines(5)
		before := vms()
		scalePool(2)
		expectMachines(2)
		Expect(vms()).To(Equal(map[string]types.UID{pool + "-0": before[pool+"-0"], pool + "-1": before[pool+"-1"]}))
	})

	It("replaces the instance of a deleted Machine with a new VM", func() {
		before := vms()
		Expect(c.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool + "-1"}})).To(Succeed())
		Eventually(func() types.UID { return vms()[pool+"-1"] }).WithTimeout(timeout).WithPolling(time.Second).
			ShouldNot(Or(BeEmpty(), Equal(before[pool+"-1"])), func() string { return describe(ctx, ns) })
		expectMachines(2)
		Expect(vms()[pool+"-0"]).To(Equal(before[pool+"-0"]), "the other VM stays")
	})

	It("rolls a template change through the instances' Machines", func() {
		before := vms()
		Expect(retryWrite(func() error {
			p := &infrav1.KubevirtMachinePool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, p); err != nil {
				return err
			}
			p.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"rolled": "yes"}
			return c.Update(ctx, p)
		})).To(Succeed())
		Eventually(func(g Gomega) string {
			vms := &kubevirtv1.VirtualMachineList{}
			g.Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns), client.MatchingLabels{infrav1.KubevirtMachinePoolLabel: pool})).To(Succeed())
			rolled := 0
			for _, vm := range vms.Items {
				if vm.DeletionTimestamp.IsZero() && vm.Labels["rolled"] == "yes" && vm.UID != before[vm.Name] {
					rolled++
				}
			}
			return fmt.Sprintf("%d of %d VMs rolled", rolled, len(vms.Items))
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("2 of 2 VMs rolled"), func() string { return describe(ctx, ns) })
		expectMachines(2)
	})

	It("leaves nothing on the infra cluster when the cluster is deleted", func() {
		deleteCluster(ctx, ns, name)
		expectNoPools(ctx, ns)
	})
})

var _ = Describe("ClusterClass kubevirt's default-pool class", func() {
	ctx := context.Background()
	BeforeEach(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
	})

	It("runs a MachinePool of the topology to Running, and leaves nothing behind", func() {
		ns := newNamespace(ctx, "e2e-topology-pool-")
		out, err := cc.Run(ctx, "generate", "cluster", "tp", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--flavor", "topology")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, c, []byte(out))).To(Succeed())
		updateTopology(ctx, ns, "tp", func(t *clusterv1.Topology) {
			t.Workers.MachinePools = []clusterv1.MachinePoolTopology{{Class: "default-pool", Name: "mp-0", Replicas: ptr.To[int32](2)}}
		})
		expectRunning(ctx, ns, "tp")
		var mp, kmp string
		Eventually(func(g Gomega) string {
			mps := &clusterv1.MachinePoolList{}
			g.Expect(c.List(ctx, mps, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterTopologyMachinePoolNameLabel: "mp-0"})).To(Succeed())
			if len(mps.Items) == 1 {
				mp, kmp = mps.Items[0].Name, mps.Items[0].Spec.Template.Spec.InfrastructureRef.Name
			}
			return kmp
		}).WithTimeout(timeout).WithPolling(time.Second).ShouldNot(BeEmpty())
		expectPoolMachines(ctx, ns, mp, kmp, 2)
		p := &infrav1.KubevirtMachinePool{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kmp}, p)).To(Succeed())
		Expect(p.Spec.Template.Spec.RootDisk.Image.Registry.URL).To(HaveSuffix(":v1.34.1"), "the image patch follows the pool's version")
		deleteCluster(ctx, ns, "tp")
		expectNoPools(ctx, ns)
	})
})

// poolVMs maps the live VMs of a KubevirtMachinePool's VirtualMachinePool
// to their UIDs.
func poolVMs(ctx context.Context, ns, kmp string) map[string]types.UID {
	vms := &kubevirtv1.VirtualMachineList{}
	Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns), client.MatchingLabels{infrav1.KubevirtMachinePoolLabel: kmp})).To(Succeed())
	out := map[string]types.UID{}
	for _, vm := range vms.Items {
		if vm.DeletionTimestamp.IsZero() {
			out[vm.Name] = vm.UID
		}
	}
	return out
}

// expectPoolMachines waits until a MachinePool is Running with n ready
// replicas and n Machines, each with a Node, one per VM of its
// KubevirtMachinePool.
func expectPoolMachines(ctx context.Context, ns, mpName, kmp string, n int) {
	Eventually(func() string {
		mp := &clusterv1.MachinePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: mpName}, mp); err != nil {
			return err.Error()
		}
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mpName}); err != nil {
			return err.Error()
		}
		vms := poolVMs(ctx, ns, kmp)
		withNode := 0
		for _, m := range machines.Items {
			if _, ok := vms[m.Name]; ok && m.Status.NodeRef.IsDefined() && m.DeletionTimestamp.IsZero() {
				withNode++
			}
		}
		return fmt.Sprintf("phase %s, %d ready replicas, %d VMs, %d Machines, %d with a Node",
			mp.Status.Phase, ptr.Deref(mp.Status.ReadyReplicas, 0), len(vms), len(machines.Items), withNode)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(
		fmt.Sprintf("phase Running, %d ready replicas, %d VMs, %d Machines, %d with a Node", n, n, n, n)),
		func() string { return describe(ctx, ns) })
}

// expectNoPools waits until the infra cluster has no VirtualMachinePool
// and no VM left in the namespace.
func expectNoPools(ctx context.Context, ns string) {
	Eventually(func(g Gomega) int {
		pools := &poolv1.VirtualMachinePoolList{}
		vms := &kubevirtv1.VirtualMachineList{}
		g.Expect(w.Infra.Client.List(ctx, pools, client.InNamespace(ns))).To(Succeed())
		g.Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
		return len(pools.Items) + len(vms.Items)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero())
}

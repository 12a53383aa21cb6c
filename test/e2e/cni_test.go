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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// healthCheckTimeout is the flavors' 300 s node health check timeout
// scaled to the world.
const healthCheckTimeout = 5 * time.Second

var _ = Describe("A cluster generated with CNI=none", Ordered, func() {
	ctx := context.Background()
	var ns string
	const name = "nocni"
	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		ns = newNamespace(ctx, "e2e-nocni-")
		applyGenerated(ctx, ns, map[string]string{"CNI": "none"},
			"generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "--worker-machine-count", "1")
	})

	It("has Nodes that wait NotReady with the kubelet's message, and no Machine is remediated for twice the health check's timeout", func() {
		machines := &clusterv1.MachineList{}
		Eventually(func(g Gomega) {
			g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(2))
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has a Node", m.Name)
				ready := conditions.Get(&m, clusterv1.MachineNodeReadyCondition)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Message).To(ContainSubstring(world.KubeletNoNetworkMessage))
			}
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
		node, err := w.Workloads.Node(ctx, types.NamespacedName{Namespace: ns, Name: name}, machines.Items[0].Status.NodeRef.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Status.Conditions).To(ContainElement(SatisfyAll(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionFalse),
			HaveField("Reason", world.KubeletNotReadyReason), HaveField("Message", world.KubeletNoNetworkMessage))))
		Expect(node.Spec.Taints).To(ContainElement(HaveField("Key", corev1.TaintNodeNotReady)))

		By("the flavor's health checks, with the world's timeout, find every Machine healthy")
		for _, mhc := range []string{name + "-md-0", name + "-control-plane"} {
			patchHealthCheck(ctx, ns, mhc, func(mhc *clusterv1.MachineHealthCheck) {
				for i := range mhc.Spec.Checks.UnhealthyNodeConditions {
					mhc.Spec.Checks.UnhealthyNodeConditions[i].TimeoutSeconds = ptr.To(int32(healthCheckTimeout.Seconds()))
				}
			})
		}
		healthy := func(g Gomega) {
			current := &clusterv1.MachineList{}
			g.Expect(c.List(ctx, current, client.InNamespace(ns))).To(Succeed())
			g.Expect(current.Items).To(HaveLen(len(machines.Items)))
			for i, m := range current.Items {
				g.Expect(m.UID).To(Equal(machines.Items[i].UID), "machine %s is the same", m.Name)
				g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "machine %s is not deleted", m.Name)
				g.Expect(conditions.IsTrue(&m, clusterv1.MachineHealthCheckSucceededCondition)).To(BeTrue(),
					"machine %s: %v", m.Name, conditions.Get(&m, clusterv1.MachineHealthCheckSucceededCondition))
			}
		}
		Eventually(healthy).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
		Consistently(healthy).WithTimeout(2 * healthCheckTimeout).WithPolling(time.Second).Should(Succeed())
	})

	It("turns Ready once the CNI is installed by hand from the flavor's own manifests", func() {
		// What a user does: apply the manifests of the ConfigMap the flavor
		// created to the tenant cluster, with its kubeconfig.
		cm := &corev1.ConfigMap{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cni-flannel"}, cm)).To(Succeed())
		tenant, _, err := tenantClient(ctx, ns, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, tenant, []byte(cm.Data["flannel.yaml"]))).To(Succeed())

		Eventually(func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(2))
			for _, m := range machines.Items {
				g.Expect(conditions.IsTrue(&m, clusterv1.MachineNodeReadyCondition)).To(BeTrue(), "machine %s", m.Name)
			}
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
		bindings := &addonsv1.ClusterResourceSetBindingList{}
		Expect(c.List(ctx, bindings, client.InNamespace(ns))).To(Succeed())
		Expect(bindings.Items).To(BeEmpty(), "the flavor's ClusterResourceSet selected nothing")
		deleteClusterLater(ctx, ns, name)
	})
})

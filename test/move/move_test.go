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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("clusterctl move", Ordered, func() {
	ctx := context.Background()
	var ns string

	// BeforeSuite applied the cluster, beside the other spec's.
	BeforeAll(func() { ns = movedNS })

	It("moves a running tenant cluster to the second management cluster: nothing recreated, the second provider adopts it", func() {
		expectMachinesWithNodes(ctx, from.Client, ns, 2)
		Eventually(func() bool {
			s := &corev1.Secret{}
			Expect(from.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "infra-kubeconfig"}, s)).To(Succeed())
			return movable.Labelled(s)
		}).WithTimeout(timeout).Should(BeTrue(), "the provider marks the infra kubeconfig Secret for clusterctl move")
		kc := &infrav1.KubevirtCluster{}
		Expect(from.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moved"}, kc)).To(Succeed())
		Expect(kc.Annotations).NotTo(HaveKey(movable.BlockAnnotation), "an external infra cluster does not block the move")
		before := infraUIDs(ctx, ns)
		Expect(before).To(HaveKeyWithValue("VirtualMachine", HaveLen(2)))

		out, err := cc.Run(ctx, "move", "-n", ns, "--kubeconfig", from.Kubeconfig, "--to-kubeconfig", to.Kubeconfig)
		Expect(err).NotTo(HaveOccurred(), out)

		By("the first management cluster keeps nothing of the tenant")
		for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &infrav1.KubevirtClusterList{},
			&infrav1.KubevirtMachineList{}, &infrav1.KubevirtMachineTemplateList{}, &corev1.SecretList{}} {
			Eventually(func() int {
				Expect(from.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				return len(itemsOf(list))
			}).WithTimeout(timeout).Should(BeZero(), "%T left on the first management cluster", list)
		}

		By("the second provider adopts the machines: they are ready again, on the same VMs")
		Eventually(func() string {
			kms := &infrav1.KubevirtMachineList{}
			Expect(to.Client.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
			ready := 0
			for i := range kms.Items {
				if conditions.IsTrue(&kms.Items[i], infrav1.ReadyCondition) && ptr.Deref(kms.Items[i].Spec.ProviderID, "") != "" {
					ready++
				}
			}
			return fmt.Sprintf("%d/%d ready", ready, len(kms.Items))
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("2/2 ready"))
		s := &corev1.Secret{}
		Expect(to.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "infra-kubeconfig"}, s)).To(Succeed())
		Expect(s.Data[infrav1.InfraClusterSecretKubeconfigKey]).To(Equal(w.Infra.KubeConfig))
		cluster := &clusterv1.Cluster{}
		Expect(to.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moved"}, cluster)).To(Succeed())
		Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse(), "clusterctl move resumes the cluster on the target")
		Consistently(func() map[string][]string { return infraUIDs(ctx, ns) }).WithTimeout(5*time.Second).Should(Equal(before),
			"no VM, VMI, DataVolume or Service of the tenant was recreated on the infra cluster")
	})

	It("scales on the second management cluster", func() {
		before := infraUIDs(ctx, ns)["VirtualMachine"]
		scaleTo(ctx, ns, "moved-md-0", 2)
		expectMachinesWithNodes(ctx, to.Client, ns, 3)
		Expect(infraUIDs(ctx, ns)["VirtualMachine"]).To(SatisfyAll(HaveLen(3), ContainElements(before)))
	})

	It("deletes the tenant from the second management cluster, VMs included", func() {
		Expect(to.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moved"}})).To(Succeed())
		Eventually(func() int {
			vms := &kubevirtv1.VirtualMachineList{}
			Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			kms := &infrav1.KubevirtMachineList{}
			Expect(to.Client.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
			return len(vms.Items) + len(kms.Items)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero())
	})
})

// newTenantNamespace creates a namespace named after prefix on the first
// management cluster, with the infra kubeconfig Secret the external-infra
// flavor names by default, and a namespace of the same name on the shared
// infra cluster, where the tenant's VMs live. It returns the name.
// applyMovedCluster applies, in a namespace of its own on the first
// management cluster, the external-infra cluster the first spec moves,
// and returns the namespace.
func applyMovedCluster(ctx context.Context) string {
	ns := newTenantNamespace(ctx, "e2e-move-")
	out, err := cc.Run(ctx, "generate", "cluster", "moved", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns,
		"--flavor", "external-infra", "--worker-machine-count", "1")
	Expect(err).NotTo(HaveOccurred())
	Expect(world.ApplyYAML(ctx, from.Client, []byte(out))).To(Succeed())
	return ns
}

func newTenantNamespace(ctx context.Context, prefix string) string {
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(from.Client.Create(ctx, namespace)).To(Succeed())
	ns := namespace.Name
	Expect(w.Infra.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(from.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infra-kubeconfig"},
		Data: map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: w.Infra.KubeConfig}})).To(Succeed())
	return ns
}

// scaleTo sets the replicas of a MachineDeployment on the second
// management cluster.
func scaleTo(ctx context.Context, ns, name string, n int32) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		md := &clusterv1.MachineDeployment{}
		if err := to.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
			return err
		}
		md.Spec.Replicas = ptr.To(n)
		return to.Client.Update(ctx, md)
	})).To(Succeed())
}

// expectMachinesWithNodes waits for n Machines, each with a Node.
func expectMachinesWithNodes(ctx context.Context, c client.Client, ns string, n int) {
	Eventually(func() (string, error) { return world.MachinesWithNodes(ctx, c, ns) }).
		WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, %d with a Node", n, n)))
}

// infraUIDs are the UIDs of the tenant's objects on the infra cluster.
func infraUIDs(ctx context.Context, ns string) map[string][]string {
	uids, err := world.TenantUIDs(ctx, w.Infra.Client, ns)
	Expect(err).NotTo(HaveOccurred())
	return uids
}

// itemsOf returns the objects of a list.
func itemsOf(list client.ObjectList) []client.Object {
	items, err := meta.ExtractList(list)
	Expect(err).NotTo(HaveOccurred())
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		out = append(out, item.(client.Object))
	}
	return out
}

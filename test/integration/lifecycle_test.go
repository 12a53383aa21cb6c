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
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

func TestDeletionRemovesEverything(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "del-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(km), &infrav1.KubevirtMachine{}))
	}).Should(BeTrue())
	// The finalizer went only after the VM, its instance and its Secret.
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachineInstance{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, "del-0-userdata", &corev1.Secret{}))).To(BeTrue())
}

func TestVMDeletedOutOfBand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "oob-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(w.Env.Client.Delete(ctx, vm)).To(Succeed())

	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.VirtualMachineDeletedReason))
	cur := get(t, tc.c, km)
	g.Expect(condition(cur, infrav1.ReadyCondition)).To(HavePrefix("False"))
	g.Expect(condition(cur, infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("MachineHealthCheck"))
	// No new VM with a new identity.
	NewWithT(t).Consistently(func() bool {
		return apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{}))
	}).WithTimeout(2 * time.Second).Should(BeTrue())
	// Deleting the machine still completes.
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(km), &infrav1.KubevirtMachine{}))
	}).Should(BeTrue())
}

func TestUnreachableInfraCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Name: "infra-kubeconfig"}
	})
	// A kubeconfig pointing at a port where nothing listens.
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infra-kubeconfig", Namespace: tc.ns},
		Data: map[string][]byte{"kubeconfig": []byte(fixture.UnreachableKubeconfig)}})).To(Succeed())
	km := tc.newMachine(t, fixture.MachineOptions{Name: "unreach-0"})
	eventually(t, tc.reason(km, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.InfraClusterUnreachableReason))
	cur := get(t, tc.c, km)
	g.Expect(condition(cur, infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("cannot use the infra cluster"))
	g.Expect(condition(cur, infrav1.ReadyCondition)).To(HavePrefix("False"))

	// Deleting keeps the finalizer: the VM might still run there.
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.DeletingReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("until the infra cluster can be used"))
	g.Expect(get(t, tc.c, km).Finalizers).To(ContainElement(infrav1.MachineFinalizer))
}

// TestNodeProviderID plays a tenant cluster whose kubelets register Nodes
// without a providerID: the provider sets it through Cluster API's
// ClusterCache once the cluster is reachable.
func TestNodeProviderID(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	key := tc.reachable(t)

	cp := tc.newMachine(t, fixture.MachineOptions{Name: "node-cp-0", ControlPlane: true})
	eventually(t, tc.provisioned(cp)).Should(Succeed())
	// The guest joined: its Node exists, without a providerID.
	eventually(t, func() error { _, err := w.Workloads.Node(ctx, key, "node-cp-0"); return err }).Should(Succeed())
	g.Expect(get(t, tc.c, cp).Status.NodeUpdated).To(BeFalse())

	// What Cluster API does once the KubevirtCluster is provisioned.
	cluster := get(t, tc.c, tc.cluster)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(w.Env.Client.Status().Update(ctx, cluster)).To(Succeed())
	eventually(t, providerIDOf(ctx, key, "node-cp-0")).Should(Equal("kubevirt://node-cp-0"))
	eventually(t, func() bool { return get(t, tc.c, cp).Status.NodeUpdated }).Should(BeTrue())

	// The Node carries the zone of the infra host its VM runs on, and
	// follows the VM when it comes back on a host in another zone: here
	// its host is cordoned and its VM instance deleted, so virt-controller
	// starts a new one elsewhere.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, cp.Name, vmi)).To(Succeed())
	infraNode := &corev1.Node{}
	g.Expect(w.Env.Client.Get(ctx, types.NamespacedName{Name: vmi.Status.NodeName}, infraNode)).To(Succeed())
	eventually(t, zoneOf(ctx, key, "node-cp-0")).Should(Equal(infraNode.Labels[corev1.LabelTopologyZone]))
	g.Expect(get(t, tc.c, cp).Status.InfraNodeName).To(Equal(vmi.Status.NodeName))
	source := vmi.Status.NodeName
	cordon(t, source)
	g.Expect(w.Env.Client.Delete(ctx, vmi)).To(Succeed())
	eventually(t, func() string { return get(t, tc.c, cp).Status.InfraNodeName }).ShouldNot(Or(Equal(source), BeEmpty()))
	g.Expect(w.Env.Client.Get(ctx, types.NamespacedName{Name: get(t, tc.c, cp).Status.InfraNodeName}, infraNode)).To(Succeed())
	eventually(t, zoneOf(ctx, key, "node-cp-0")).Should(Equal(infraNode.Labels[corev1.LabelTopologyZone]))

	// A worker joining later is found through the Node watch.
	wk := tc.newMachine(t, fixture.MachineOptions{Name: "node-md-0"})
	eventually(t, func() bool { return get(t, tc.c, wk).Status.NodeUpdated }).Should(BeTrue())
	n, err := w.Workloads.Node(ctx, key, "node-md-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Spec.ProviderID).To(Equal("kubevirt://node-md-0"))

	// The Node registers again (deleted, the kubelet restarted) without a
	// providerID: it gets it again.
	g.Expect(w.Workloads.Leave(ctx, key, "node-md-0")).To(Succeed())
	g.Expect(w.Workloads.Join(ctx, world.Member{Cluster: key, NodeName: "node-md-0"})).To(Succeed())
	eventually(t, providerIDOf(ctx, key, "node-md-0")).Should(Equal("kubevirt://node-md-0"))
}

// zoneOf reads the zone label of a tenant Node, or the error.
func zoneOf(ctx context.Context, key types.NamespacedName, node string) func() string {
	return func() string {
		n, err := w.Workloads.Node(ctx, key, node)
		if err != nil {
			return err.Error()
		}
		return n.Labels[corev1.LabelTopologyZone]
	}
}

// providerIDOf reads the providerID of a tenant Node, or the error.
func providerIDOf(ctx context.Context, key types.NamespacedName, node string) func() string {
	return func() string {
		n, err := w.Workloads.Node(ctx, key, node)
		if err != nil {
			return err.Error()
		}
		return n.Spec.ProviderID
	}
}

// TestLongMachineName checks a name beyond the 63 characters of a label
// value or a hostname: the machine is found, provisioned and deleted
// cleanly, through the owner annotation.
func TestLongMachineName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	name := "tenant-md-workers-with-a-very-long-deployment-name-7d9f8c6b5-x2x4z-abcdef"
	km := tc.newMachine(t, fixture.MachineOptions{Name: name})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, name, vm)).To(Succeed())
	g.Expect(vm.Annotations).To(HaveKeyWithValue(infrav1.OwnerAnnotation, tc.ns+"/"+name))
	g.Expect(vm.Spec.Template.Spec.Hostname).To(HaveLen(63))
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(km), &infrav1.KubevirtMachine{}))
	}).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, name, &kubevirtv1.VirtualMachine{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, name+"-userdata", &corev1.Secret{}))).To(BeTrue())
}

// cordon marks an infra node unschedulable until the test ends.
func cordon(t *testing.T, name string) {
	t.Helper()
	cordonOn(t, w.Env.Client, name)
}

// cordonOn is cordon on the cluster c reaches.
func cordonOn(t *testing.T, c client.Client, name string) {
	t.Helper()
	setUnschedulable := func(v bool) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := &corev1.Node{}
			if err := c.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
				return err
			}
			n.Spec.Unschedulable = v
			return c.Update(context.Background(), n)
		})
	}
	NewWithT(t).Expect(setUnschedulable(true)).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(setUnschedulable(false)).To(Succeed()) })
}

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
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// TestMachinePoolRunsOnAVirtualMachinePool drives a KubevirtMachinePool
// through the real virt-controller's pool controller: the provider creates
// the VirtualMachinePool and its shared bootstrap Secret, KubeVirt makes the
// VMs, the pool reports them (replicas, providerIDs, Ready) and then writes
// nothing; rotated bootstrap data reaches the pool's Secret; scaling the
// MachinePool scales the pool; a template change reaches the pool without
// touching running VMs; deleting the KubevirtMachinePool leaves nothing.
func TestMachinePoolRunsOnAVirtualMachinePool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	mp, p, err := tc.NewMachinePool(ctx, fixture.MachinePoolOptions{Name: "pool-0", Replicas: 3})
	g.Expect(err).NotTo(HaveOccurred())
	infra := w.Env.Client
	key := types.NamespacedName{Namespace: tc.ns, Name: p.Name}

	vmNames := func() []string {
		vms := &kubevirtv1.VirtualMachineList{}
		g.Expect(infra.List(ctx, vms, client.InNamespace(tc.ns), client.MatchingLabels{infrav1.KubevirtMachinePoolLabel: p.Name})).To(Succeed())
		var names []string
		for _, vm := range vms.Items {
			if vm.DeletionTimestamp.IsZero() {
				names = append(names, vm.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	reported := func(n int) func() error { return poolReported(t, tc, p, n) }

	eventually(t, reported(3)).Should(Succeed())
	g.Expect(vmNames()).To(Equal([]string{"pool-0-0", "pool-0-1", "pool-0-2"}))
	pool := &poolv1.VirtualMachinePool{}
	g.Expect(infra.Get(ctx, key, pool)).To(Succeed())
	g.Expect(pool.Spec.ScaleInStrategy.Unmanaged).NotTo(BeNil(), "the provider picks which VMs go")
	// What the cluster autoscaler reads to scale the MachinePool from zero.
	scaled := get(t, tc.c, p)
	g.Expect(scaled.Status.Capacity).To(HaveLen(2))
	g.Expect(scaled.Status.Capacity.Cpu().String()).To(Equal("1"))
	g.Expect(scaled.Status.Capacity.Memory().String()).To(Equal("1Gi"))
	g.Expect(scaled.Status.NodeInfo.Architecture).To(Equal(infrav1.ArchitectureAmd64))
	g.Expect(conditions.IsTrue(scaled, infrav1.CapacityKnownCondition)).To(BeTrue())
	// The capacity is the provider's report, never an instruction: nothing
	// in the provider reads it, and a status written by someone else (to
	// make the autoscaler expect GPUs, say) is put back from the spec by
	// the reconcile the write itself triggers.
	forged := scaled.DeepCopy()
	forged.Status.Capacity[corev1.ResourceName("nvidia.com/gpu")] = resource.MustParse("8")
	forged.Status.NodeInfo.Architecture = "arm64"
	g.Expect(tc.c.Status().Patch(ctx, forged, client.MergeFrom(scaled))).To(Succeed())
	eventually(t, func() string {
		cur := get(t, tc.c, p)
		return fmt.Sprintf("%d resources, %s", len(cur.Status.Capacity), cur.Status.NodeInfo.Architecture)
	}).Should(Equal("2 resources, " + string(infrav1.ArchitectureAmd64)))
	secret := &corev1.Secret{}
	g.Expect(infra.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: p.Name + infrav1.UserDataSecretSuffix}, secret)).To(Succeed())
	g.Expect(secret.Data).To(HaveKeyWithValue("userdata", []byte(fixture.ValidCloudConfig)))
	g.Expect(secret.OwnerReferences).To(ConsistOf(HaveField("UID", pool.UID)), "the Secret goes with the pool")
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, infra, tc.ns, "pool-0-1", vmi)).To(Succeed())
	g.Expect(vmi.Spec.Hostname).To(BeEmpty(), "each guest is named after its VM")
	g.Expect(vmi.Labels).To(HaveKeyWithValue(infrav1.MachinePoolLabel, mp.Name))
	uids := map[string]types.UID{}
	for _, n := range vmNames() {
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(infraGet(t, infra, tc.ns, n, vm)).To(Succeed())
		uids[n] = vm.UID
	}

	// A steady pool writes nothing: not the pool's spec (KubeVirt keeps
	// writing its status a while), not the Secret, not its own status.
	versions := func() string {
		g.Expect(infra.Get(ctx, key, pool)).To(Succeed())
		g.Expect(infra.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		return fmt.Sprintf("%d/%s/%s", pool.Generation, secret.ResourceVersion,
			get(t, tc.c, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta}).ResourceVersion)
	}
	steady := versions()
	g.Consistently(versions, 3*time.Second, 200*time.Millisecond).Should(Equal(steady))

	// New bootstrap data (a rotated token) reaches the pool's Secret.
	rotated := fixture.ValidCloudConfig + "\n# rotated bootstrap token\n"
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bootstrap := &corev1.Secret{}
		if err := tc.c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: *mp.Spec.Template.Spec.Bootstrap.DataSecretName}, bootstrap); err != nil {
			return err
		}
		bootstrap.Data["value"] = []byte(rotated)
		return tc.c.Update(ctx, bootstrap)
	})).To(Succeed())
	eventually(t, func() string {
		g.Expect(infra.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		return string(secret.Data["userdata"])
	}).Should(Equal(rotated))

	// Scaling the MachinePool scales the VirtualMachinePool.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, tc.c, &clusterv1.MachinePool{ObjectMeta: mp.ObjectMeta})
		cur.Spec.Replicas = ptr.To[int32](5)
		return tc.c.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, reported(5)).Should(Succeed())

	// A template change reaches the pool, not the running VMs.
	g.Expect(infra.Get(ctx, key, pool)).To(Succeed())
	hash := pool.Annotations["capkv.io/pool-hash"]
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, tc.c, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta})
		cur.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "blue"}
		return tc.c.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, func() map[string]string {
		g.Expect(infra.Get(ctx, key, pool)).To(Succeed())
		return pool.Spec.VirtualMachineTemplate.ObjectMeta.Labels
	}).Should(HaveKeyWithValue("team", "blue"))
	g.Expect(pool.Annotations["capkv.io/pool-hash"]).NotTo(Equal(hash))
	for n, uid := range uids {
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(infraGet(t, infra, tc.ns, n, vm)).To(Succeed())
		g.Expect(vm.UID).To(Equal(uid), "VM %s is the same", n)
	}

	// Deleting the KubevirtMachinePool leaves nothing on the infra cluster.
	g.Expect(tc.c.Delete(ctx, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta})).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(tc.c.Get(ctx, key, &infrav1.KubevirtMachinePool{}))
	}).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(infra.Get(ctx, key, &poolv1.VirtualMachinePool{}))).To(BeTrue())
	g.Expect(vmNames()).To(BeEmpty())
	eventually(t, func() bool {
		return apierrors.IsNotFound(infra.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: p.Name + infrav1.UserDataSecretSuffix}, &corev1.Secret{}))
	}).Should(BeTrue())
}

// poolReported checks that a KubevirtMachinePool reports n ready instances
// <pool>-0 to <pool>-(n-1), with their providerIDs, and is Ready.
func poolReported(t *testing.T, tc *tenantCluster, p *infrav1.KubevirtMachinePool, n int) func() error {
	return func() error {
		cur := get(t, tc.c, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta})
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("%s%s-%d", infrav1.ProviderIDPrefix, p.Name, i))
		}
		ready := conditions.Get(cur, infrav1.ReadyCondition)
		if !slices.Equal(cur.Spec.ProviderIDList, want) || cur.Status.Replicas != int32(n) || cur.Status.ReadyReplicas != int32(n) ||
			ready == nil || ready.Status != "True" || !cur.Status.Ready || !ptr.Deref(cur.Status.Initialization.Provisioned, false) {
			return fmt.Errorf("providerIDs %v, replicas %d, ready %d, Ready %+v", cur.Spec.ProviderIDList, cur.Status.Replicas, cur.Status.ReadyReplicas, ready)
		}
		return nil
	}
}

// TestMachinePoolClonesOneGoldenVolume gives a pool a root disk from an
// image: the image is imported once into a golden volume the pool names in
// its status, each VM KubeVirt makes clones it into its own indexed
// DataVolume, and the pool keeps the volume in use past the retention of
// unused golden volumes, for the VMs it makes later.
func TestMachinePoolClonesOneGoldenVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	before := counters()
	_, p, err := tc.NewMachinePool(ctx, fixture.MachinePoolOptions{Name: "golden-pool", Replicas: 3, Mutate: func(p *infrav1.KubevirtMachinePool) {
		km := &infrav1.KubevirtMachine{Spec: p.Spec.Template.Spec}
		withImage(imageA, "")(km)
		p.Spec.Template.Spec = km.Spec
	}})
	g.Expect(err).NotTo(HaveOccurred())
	eventually(t, poolReported(t, tc, p, 3)).Should(Succeed())
	g.Expect(delta(before, sim.Imports)).To(BeEquivalentTo(1), "one import for the pool")
	g.Expect(delta(before, sim.Clones)).To(BeEquivalentTo(3), "one clone per VM")
	ref := get(t, tc.c, p).Status.GoldenImage
	g.Expect(ref).NotTo(BeNil())
	for i := range 3 {
		dv := &cdiv1.DataVolume{}
		g.Expect(infraGet(t, w.Env.Client, tc.ns, fmt.Sprintf("golden-pool-rootdisk-%d", i), dv)).To(Succeed())
		g.Expect(dv.Spec.Source.PVC).To(HaveField("Name", ref.Name), "VM %d clones the golden volume", i)
	}
	goldenDV := &cdiv1.DataVolume{}
	g.Consistently(func() map[string]string {
		g.Expect(infraGet(t, w.Env.Client, ref.Namespace, ref.Name, goldenDV)).To(Succeed())
		return goldenDV.Annotations
	}, 3*goldenRetention, 200*time.Millisecond).ShouldNot(HaveKey(goldenplan.UnusedSinceAnnotation), "the pool uses its golden volume")
}

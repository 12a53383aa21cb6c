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

package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// TestInPlaceHooksGrowDisksTheInfraAllows answers CanUpdateMachine for a
// larger root disk with the provider's InfraChecks on the real API
// server: declined while KubeVirt's ExpandDisks feature gate is off, then
// while the claim's storage class does not allow expansion, then while a
// quota refuses the growth, and taken in place once all allow it.
func TestInPlaceHooksGrowDisksTheInfraAllows(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := newNamespace(t)
	tn := createTenant(t, ns, "inplace-disks", nil, func(km *infrav1.KubevirtMachine) {
		km.Spec.RootDisk = &infrav1.RootDiskSpec{DiskSize: resource.MustParse("20Gi"),
			Image: infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "http://images.test/node.qcow2"}}}
	})
	km := tn.km
	machine := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, machine)).To(Succeed())

	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-fixed"}, Provisioner: "csi.capkv.test"}
	g.Expect(env.Client.Create(ctx, class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: km.Name + "-rootdisk"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}}}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	// Only a bound claim's request may change.
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: claim.Spec.Resources.Requests}
	g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
	// virt-controller reports each volume's claim in the instance's status.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: km.Name},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, VolumeStatus: []kubevirtv1.VolumeStatus{{
			Name: "rootdisk", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: claim.Name,
				Requests: claim.Spec.Resources.Requests, Capacity: claim.Spec.Resources.Requests, FilesystemOverhead: ptr.To(kubevirtv1.Percent("0"))}}}}}
	g.Expect(env.Client.Create(ctx, vmi)).To(Succeed())
	hooks := infraHooks(ctx, g)

	canUpdate := func() string {
		return askCanUpdate(g, hooks, machine, km, func(desired *infrav1.KubevirtMachine) {
			desired.Spec.RootDisk.DiskSize = resource.MustParse("40Gi")
		}).Message
	}
	declined := "needs new machines: root disk 20Gi to 40Gi: for the VM of machine " + km.Name + ", "
	g.Eventually(canUpdate).WithTimeout(10*time.Second).Should(HavePrefix(declined+"KubeVirt's ExpandDisks feature gate is off"),
		"no KubeVirt configuration turns the gate on")

	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"},
		Spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{FeatureGates: []string{"ExpandDisks"}}}}}
	g.Expect(env.Client.Create(ctx, kv)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), kv) })
	g.Expect(canUpdate()).To(Equal(declined + "disk rootdisk: storage class " + class.Name + " of claim " + claim.Name + " does not allow volume expansion"))

	class.AllowVolumeExpansion = ptr.To(true)
	g.Expect(env.Client.Update(ctx, class)).To(Succeed())
	// A quota of the infra namespace refuses the growth: the provider's
	// patch would fail, so the change is declined (a dry run of it).
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("30Gi")}}}
	g.Expect(env.Client.Create(ctx, quota)).To(Succeed())
	// What kube-controller-manager's quota controller would count.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("20Gi")}}
	g.Expect(env.Client.Status().Update(ctx, quota)).To(Succeed())
	g.Eventually(canUpdate).WithTimeout(10 * time.Second).Should(SatisfyAll(
		HavePrefix(declined+"disk rootdisk: the infra cluster refuses to grow claim "+claim.Name+" to 40Gi: "),
		ContainSubstring("exceeded quota: storage")))
	g.Expect(env.Client.Delete(ctx, quota)).To(Succeed())
	g.Eventually(canUpdate).WithTimeout(10 * time.Second).Should(Equal("in place: root disk 20Gi to 40Gi"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"), "the check was a dry run")
}

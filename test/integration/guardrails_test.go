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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/describe"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestQuotaRefusesLauncherPod fills the tenant namespace's pod quota with
// one running machine: the next machine's launcher pod is refused by the
// API server's quota admission, the machine says which quota and which
// resource, and nothing else is made for it; raising the quota lets it
// start at once, through the quota watch, with one VM and one pod.
func TestQuotaRefusesLauncherPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	first := tc.newMachine(t, fixture.MachineOptions{Name: "quota-0"})
	eventually(t, tc.provisioned(first)).Should(Succeed())

	quota := fillPodQuota(t, tc.ns, "tenant-pods")
	blocked := tc.newMachine(t, fixture.MachineOptions{Name: "quota-1"})
	eventually(t, tc.reason(blocked, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.QuotaExceededReason))
	msg := condition(get(t, tc.c, blocked), infrav1.VirtualMachineReadyCondition)
	g.Expect(msg).To(ContainSubstring("launcher pod refused by ResourceQuota tenant-pods"))
	g.Expect(msg).To(ContainSubstring("exceeded quota: tenant-pods, requested: pods=1"))

	// kubectl describe shows the quota, in the condition and the event.
	out := describeMachine(t, blocked)
	g.Expect(out).To(ContainSubstring("QuotaExceeded"))
	g.Expect(out).To(ContainSubstring("ResourceQuota tenant-pods"))

	// Nothing half-way: the VM and its instance wait, no pod runs for it.
	g.Consistently(func() int { return len(launcherPods(t, tc.ns, blocked.Name)) }).WithTimeout(3 * time.Second).Should(BeZero())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, blocked.Name, vmi)).To(Succeed())
	g.Expect(vmi.Annotations).To(HaveKey(infrav1.GuardrailsAnnotation), "the provider asked for a retry once")
	asked := vmi.Annotations[infrav1.GuardrailsAnnotation]

	// One more pod allowed: the watch brings the machine up without
	// waiting for virt-controller's backoff.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, w.Env.Client, quota)
		cur.Spec.Hard[corev1.ResourcePods] = *resource.NewQuantity(cur.Spec.Hard.Pods().Value()+1, resource.DecimalSI)
		return w.Env.Client.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, tc.provisioned(blocked)).Should(Succeed())
	g.Expect(infraGet(t, w.Env.Client, tc.ns, blocked.Name, vmi)).To(Succeed())
	g.Expect(vmi.Annotations[infrav1.GuardrailsAnnotation]).NotTo(Equal(asked), "the quota change was passed on")
	g.Expect(launcherPods(t, tc.ns, blocked.Name)).To(HaveLen(1))
	vms := &kubevirtv1.VirtualMachineList{}
	g.Expect(w.Env.Client.List(ctx, vms, client.InNamespace(tc.ns))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(2), "no VM was made twice")
}

// TestQuotaRefusesDiskClaim refuses the claim of a machine's data disk:
// CDI reports the quota on the DataVolume, the machine repeats it, and a
// quota raised lets CDI create the claim.
func TestQuotaRefusesDiskClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "tenant-storage", Namespace: tc.ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("10Gi")}}}
	g.Expect(w.Env.Client.Create(ctx, quota)).To(Succeed())
	eventually(t, quotaComputed(quota)).Should(BeTrue())

	km := tc.newMachine(t, fixture.MachineOptions{Name: "disk-quota", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.DataDisks = []infrav1.DataDiskSpec{{Name: "containerd", DiskSize: resource.MustParse("50Gi")}}
	}})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.QuotaExceededReason))
	msg := condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)
	g.Expect(msg).To(ContainSubstring("claim of DataVolume disk-quota-containerd refused by ResourceQuota tenant-storage"))
	g.Expect(msg).To(ContainSubstring("requests.storage"))
	g.Expect(launcherPods(t, tc.ns, km.Name)).To(BeEmpty())

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, w.Env.Client, quota)
		// Room for the disk twice, with CDI's filesystem overhead: CDI's
		// populator fills a temporary claim of the same size beside it
		// (docs/operations.md#quota).
		cur.Spec.Hard[corev1.ResourceRequestsStorage] = resource.MustParse("120Gi")
		return w.Env.Client.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
	dv := &cdiv1.DataVolume{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "disk-quota-containerd", dv)).To(Succeed())
	g.Expect(dv.Status.Phase).To(Equal(cdiv1.Succeeded))
}

// TestLimitRangeRefusesLauncherPod refuses every launcher pod with a
// LimitRange's minimum: the machine carries the API server's words, and
// removing the range lets it start at once.
func TestLimitRangeRefusesLauncherPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "big-only", Namespace: tc.ns},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Min: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")}}}}}
	g.Expect(w.Env.Client.Create(ctx, limits)).To(Succeed())
	km := tc.newMachine(t, fixture.MachineOptions{Name: "limited"})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.LimitRangeViolatedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("minimum memory usage per Container is 64Gi"))
	g.Expect(launcherPods(t, tc.ns, km.Name)).To(BeEmpty())

	g.Expect(w.Env.Client.Delete(ctx, limits)).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(launcherPods(t, tc.ns, km.Name)).To(HaveLen(1))
}

// fillPodQuota creates a pod quota of the namespace equal to the pods it
// runs, once the quota controller has counted them.
func fillPodQuota(t *testing.T, ns, name string) *corev1.ResourceQuota {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100")}}}
	g.Expect(w.Env.Client.Create(ctx, quota)).To(Succeed())
	eventually(t, quotaComputed(quota)).Should(BeTrue())
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, w.Env.Client, quota)
		cur.Spec.Hard[corev1.ResourcePods] = cur.Status.Used[corev1.ResourcePods]
		return w.Env.Client.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, quotaComputed(quota)).Should(BeTrue())
	return quota
}

// quotaComputed polls whether the quota controller has set the quota's
// status to its current spec; admission enforces it only then.
func quotaComputed(quota *corev1.ResourceQuota) func() bool {
	return func() bool {
		cur := &corev1.ResourceQuota{}
		if err := w.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(quota), cur); err != nil {
			return false
		}
		for name, q := range cur.Spec.Hard {
			if h, ok := cur.Status.Hard[name]; !ok || !h.Equal(q) {
				return false
			}
			if _, ok := cur.Status.Used[name]; !ok {
				return false
			}
		}
		return true
	}
}

// launcherPods lists the virt-launcher pods of the VM instance name.
func launcherPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(w.Env.Client.List(context.Background(), pods, client.InNamespace(ns),
		client.MatchingLabels{"vm.kubevirt.io/name": name})).To(Succeed())
	return pods.Items
}

// describeMachine is what kubectl describe prints for a KubevirtMachine.
func describeMachine(t *testing.T, km *infrav1.KubevirtMachine) string {
	t.Helper()
	mapping, err := w.Env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: "KubevirtMachine"})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// kubectl describes custom resources with its generic describer.
	d, ok := describe.GenericDescriberFor(mapping, w.Env.Config)
	if !ok {
		t.Fatal("no describer for KubevirtMachine")
	}
	out, err := d.Describe(km.Namespace, km.Name, describe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return out
}

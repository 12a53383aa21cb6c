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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// scaleMachines is how many machines TestFiftyMachines creates.
const scaleMachines = 50

// withRootDataVolume gives the machine a root disk imported by CDI, so each
// machine also has a DataVolume to clean up.
func withRootDataVolume(km *infrav1.KubevirtMachine) {
	s := &km.Spec.VirtualMachineTemplate.Spec
	s.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://images.example/ubuntu-24.04.qcow2"}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		},
	}}
	s.Template.Spec.Volumes = []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
		DataVolume: &kubevirtv1.DataVolumeSource{Name: "root"}}}}
	s.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("512Mi"))
}

// TestFiftyMachines creates 50 machines, checks that once they are ready the
// provider writes nothing for 60 s, then deletes them and checks that
// nothing is left in the infra namespace.
func TestFiftyMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The cluster has everything a KubevirtCluster keeps on the infra
	// cluster, so the steady-state check covers it too.
	tmpl := vlanTemplate(t)
	tc := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: tmpl}
		kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{{Name: "scrape", Spec: networkingv1.NetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(9100))}}}}}}}
	})
	eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
	start := time.Now()
	kms := make([]*infrav1.KubevirtMachine, 0, scaleMachines)
	for i := range scaleMachines {
		kms = append(kms, tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("scale-%02d", i), Mutate: withRootDataVolume}))
	}
	for _, km := range kms {
		NewWithT(t).Eventually(tc.provisioned(km)).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	}
	t.Logf("%d machines provisioned in %s", scaleMachines, time.Since(start).Round(time.Millisecond))
	g.Expect(list(t, tc.ns, &cdiv1.DataVolumeList{})).To(Equal(scaleMachines))

	// Steady state: the provider makes no writes to either API server,
	// even when every machine is reconciled again.
	before := writes.count()
	reconciles, clusterReconciles := reconcileCount(t, "kubevirtmachine"), reconcileCount(t, "kubevirtcluster")
	for _, km := range kms {
		cur := get(t, tc.c, km)
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "test.capkv.io/touch", "1")
		g.Expect(w.Env.Client.Update(ctx, cur)).To(Succeed())
	}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kc := get(t, tc.c, tc.kc)
		// Adding, not replacing: the provider's own block-move annotation
		// stays, or putting it back would be a write.
		metav1.SetMetaDataAnnotation(&kc.ObjectMeta, "test.capkv.io/touch", "1")
		return tc.c.Update(ctx, kc)
	})).To(Succeed())
	NewWithT(t).Eventually(func() float64 { return reconcileCount(t, "kubevirtmachine") }).WithTimeout(30 * time.Second).
		Should(BeNumerically(">=", reconciles+scaleMachines))
	NewWithT(t).Eventually(func() float64 { return reconcileCount(t, "kubevirtcluster") }).WithTimeout(30 * time.Second).
		Should(BeNumerically(">", clusterReconciles))
	NewWithT(t).Consistently(func() []string { return writes.atRest(before, tc.ns) }).
		WithTimeout(60*time.Second).WithPolling(time.Second).Should(BeEmpty(), "the provider wrote at rest")
	t.Logf("writes during 60 s of steady state: %d", writes.count()-before)

	start = time.Now()
	for _, km := range kms {
		g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	}
	NewWithT(t).Eventually(func() int { return list(t, tc.ns, &infrav1.KubevirtMachineList{}) }).
		WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(BeZero())
	t.Logf("%d machines deleted in %s", scaleMachines, time.Since(start).Round(time.Millisecond))
	// Nothing is left: the finalizers went only after everything was gone.
	g.Expect(list(t, tc.ns, &kubevirtv1.VirtualMachineList{})).To(BeZero())
	g.Expect(list(t, tc.ns, &kubevirtv1.VirtualMachineInstanceList{})).To(BeZero())
	g.Expect(list(t, tc.ns, &cdiv1.DataVolumeList{})).To(BeZero())
	secrets := &corev1.SecretList{}
	g.Expect(w.Env.Client.List(ctx, secrets, client.InNamespace(tc.ns), client.HasLabels{infrav1.KubevirtMachineLabel})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty())
}

// list counts the objects of a kind in a namespace.
func list(t *testing.T, ns string, l client.ObjectList) int {
	t.Helper()
	NewWithT(t).Expect(w.Env.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	return meta.LenList(l)
}

// reconcileCount reads how many reconciles a controller finished, from
// controller-runtime's metrics registry.
func reconcileCount(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

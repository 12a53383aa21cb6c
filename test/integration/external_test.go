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

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// TestExternalInfraCluster runs the provider against a world whose KubeVirt
// lives on a second API server, reached through a kubeconfig Secret that
// also names the infra namespace.
func TestExternalInfraCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ext, err := world.Start(world.Options{ExternalInfra: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(ext.Stop()).To(Succeed()) })
	stop, err := startProvider(ext, &writeCounter{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(stop)

	g.Expect(ext.Infra.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}})).To(Succeed())
	tc := newTenantClusterOn(t, ext.Env.Client, fixture.TenantOptions{Mutate: func(kc *infrav1.KubevirtCluster) {
		kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Name: "infra"}
	}})
	infraSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: tc.ns},
		Data: map[string][]byte{"kubeconfig": ext.Infra.KubeConfig, "namespace": []byte("tenants")}}
	g.Expect(ext.Env.Client.Create(ctx, infraSecret)).To(Succeed())
	caches := gauge(t, "capkv_infra_cluster_caches")
	km := tc.newMachine(t, fixture.MachineOptions{Name: "remote-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(gauge(t, "capkv_infra_cluster_caches")).To(Equal(caches + 1))
	eventually(t, guestOutcome(ext.Infra.Client, "tenants", km.Name)).Should(Equal("joined"))

	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", km.Name, vm)).To(Succeed())
	g.Expect(vm.OwnerReferences).To(BeEmpty(), "no owner reference can cross clusters")
	g.Expect(vm.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineNamespaceLabel, tc.ns))
	g.Expect(apierrors.IsNotFound(infraGet(t, ext.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{}))).To(BeTrue())
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", "remote-0-userdata", &corev1.Secret{})).To(Succeed())

	// Breaking the kubeconfig is noticed through the Secret watch, and
	// mending it brings the infra cluster back with a new client.
	infraSecret = get(t, ext.Env.Client, infraSecret)
	infraSecret.Data["kubeconfig"] = []byte("not: [a kubeconfig")
	g.Expect(ext.Env.Client.Update(ctx, infraSecret)).To(Succeed())
	eventually(t, tc.reason(km, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.InfraClusterSecretInvalidReason))
	// Another user's kubeconfig: a new cache and new watches replace the old.
	user, err := ext.Infra.ControlPlane.AddUser(envtest.User{Name: "capkv-rotated", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	rotated, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	infraSecret = get(t, ext.Env.Client, infraSecret)
	infraSecret.Data["kubeconfig"] = rotated
	g.Expect(ext.Env.Client.Update(ctx, infraSecret)).To(Succeed())
	eventually(t, tc.reason(km, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.AvailableReason))
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(gauge(t, "capkv_infra_cluster_caches")).To(Equal(caches+1), "the old cache was stopped")

	// The VM's events reach the provider through the rebuilt watches: a VM
	// deleted there is noticed here.
	g.Expect(ext.Infra.Client.Delete(ctx, vm)).To(Succeed())
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.VirtualMachineDeletedReason))

	g.Expect(ext.Env.Client.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(ext.Env.Client.Get(ctx, client.ObjectKeyFromObject(km), &infrav1.KubevirtMachine{}))
	}).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(infraGet(t, ext.Infra.Client, "tenants", "remote-0-userdata", &corev1.Secret{}))).To(BeTrue())
	// Once neither machine nor KubevirtCluster uses the infra cluster, its
	// cache is stopped.
	g.Expect(ext.Env.Client.Delete(ctx, tc.kc)).To(Succeed())
	eventually(t, func() float64 { return gauge(t, "capkv_infra_cluster_caches") }).Should(Equal(caches))
}

// gauge reads a gauge from controller-runtime's metrics registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

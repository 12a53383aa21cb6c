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
	"net/url"
	"testing"
	"time"

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
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// TestExternalInfraCluster runs the provider against a world whose KubeVirt
// lives on a second API server, reached through a kubeconfig Secret that
// also names the infra namespace; an infra node drained there moves its
// VMs by live migration, as on the management cluster.
func TestExternalInfraCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ext := externalWorld(t)
	// The world itself: KubeVirt, its nodes and their simulator belong to
	// the second API server only.
	g.Expect(ext.Infra).NotTo(BeIdenticalTo(ext.Env))
	g.Expect(ext.Infra.Config.Host).NotTo(Equal(ext.Env.Config.Host))
	nodes := &corev1.NodeList{}
	g.Expect(ext.Env.Client.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).To(BeEmpty(), "infra nodes belong to the infra cluster only")
	g.Expect(ext.SimMetricsURL).To(HavePrefix("http://127.0.0.1:"))
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

	// An infra node drained under a migratable machine: the provider
	// moves the VM by a live migration on the infra cluster, as on the
	// management cluster (TestExternalEvictionFallsBackWhenMigrationFails
	// shows the tenant drain that follows a failed one), and the drain
	// completes.
	moved := tc.newMachine(t, fixture.MachineOptions{Name: "remote-1", Mutate: migratable(kubevirtv1.EvictionStrategyExternal)})
	eventually(t, tc.provisioned(moved)).Should(Succeed())
	eventually(t, tc.reason(moved, infrav1.LiveMigratableCondition)).ShouldNot(Equal("<none>"))
	g.Expect(condition(get(t, tc.c, moved), infrav1.LiveMigratableCondition)).To(HavePrefix("True"))
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", moved.Name, vmi)).To(Succeed())
	source, uid := vmi.Status.NodeName, vmi.UID
	eventually(t, drainInfraNodeOn(t, ext.Infra.Client, source)).Should(Succeed())
	eventually(t, tc.reason(moved, infrav1.MigratingCondition)).Should(Equal(infrav1.MigrationSucceededReason))
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", moved.Name, vmi)).To(Succeed())
	g.Expect(vmi.UID).To(Equal(uid), "the same instance, migrated")
	g.Expect(vmi.Status.NodeName).NotTo(Equal(source))
	eventually(t, tc.provisioned(moved)).Should(Succeed())
	g.Expect(ext.Env.Client.Delete(ctx, moved)).To(Succeed())

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

// TestInfraClusterOutage cuts an external infra cluster's API server off
// while one machine runs and another is being created, and deletes and
// restores the infra kubeconfig Secret under them: the machines say so
// (InfraClusterUnreachable, InfraClusterSecretInvalid), the running one
// stays provisioned, the provider does not hammer either API server, and
// once the infra cluster is back each machine has exactly its one VM.
func TestInfraClusterOutage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ext := externalWorld(t)
	// The last test of the shared world, which would idle beside the
	// tests after it.
	t.Cleanup(func() { g.Expect(stopExternalWorld()).To(Succeed()) })
	// Its own namespace on the shared infra cluster: nothing another
	// test left there counts here.
	const infraNamespace = "outage-tenants"
	counter := &writeCounter{}
	stop, err := startProvider(ext, counter)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(stop)
	apiServer, err := url.Parse(ext.Infra.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, err := testenv.NewOutageProxy(apiServer.Host)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.Kubeconfig(ext.Infra.KubeConfig)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(ext.Infra.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: infraNamespace}})).To(Succeed())
	tc := newTenantClusterOn(t, ext.Env.Client, fixture.TenantOptions{Mutate: func(kc *infrav1.KubevirtCluster) {
		kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Name: "infra"}
	}})
	infraSecret := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: tc.ns},
			Data: map[string][]byte{"kubeconfig": kubeconfig, "namespace": []byte(infraNamespace)}}
	}
	g.Expect(ext.Env.Client.Create(ctx, infraSecret())).To(Succeed())
	running := tc.newMachine(t, fixture.MachineOptions{Name: "running"})
	eventually(t, tc.provisioned(running)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, ext.Infra.Client, infraNamespace, running.Name, vm)).To(Succeed())
	runningUID := vm.UID

	// The infra API server goes away while the next machine is created.
	creating := tc.newMachine(t, fixture.MachineOptions{Name: "creating"})
	eventually(t, tc.reason(creating, infrav1.VirtualMachineReadyCondition)).ShouldNot(Equal("<none>"))
	proxy.Cut()
	cut := time.Now()
	before := counter.count()
	// Well within the 30 s recheck: the lost connection wakes the machines.
	for _, km := range []*infrav1.KubevirtMachine{running, creating} {
		NewWithT(t).Eventually(tc.reason(km, infrav1.InfraClusterAvailableCondition)).WithTimeout(15 * time.Second).
			Should(Equal(infrav1.InfraClusterUnreachableReason))
	}
	t.Logf("both machines reported InfraClusterUnreachable %s after the cut", time.Since(cut).Round(time.Second))
	g.Expect(get(t, tc.c, running).Status.Ready).To(BeTrue(), "a running VM is not taken for lost while its API server is away")
	// 30 s of outage: the machines are looked at again every 30 s, not
	// in a loop, and what they report does not change.
	time.Sleep(30 * time.Second)
	during := counter.count() - before
	t.Logf("writes to either API server during 30 s of outage: %d", during)
	g.Expect(during).To(BeNumerically("<=", 12))

	g.Expect(proxy.Restore()).To(Succeed())
	restored := time.Now()
	// The first request that gets through wakes them again.
	NewWithT(t).Eventually(tc.reason(running, infrav1.InfraClusterAvailableCondition)).WithTimeout(15 * time.Second).
		Should(Equal(infrav1.AvailableReason))
	for _, km := range []*infrav1.KubevirtMachine{running, creating} {
		NewWithT(t).Eventually(tc.provisioned(km)).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		eventually(t, tc.reason(km, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.AvailableReason))
	}
	t.Logf("both machines provisioned and available %s after the infra cluster came back", time.Since(restored).Round(time.Second))
	g.Expect(infraGet(t, ext.Infra.Client, infraNamespace, running.Name, vm)).To(Succeed())
	g.Expect(vm.UID).To(Equal(runningUID), "the running VM was not replaced")
	vms := &kubevirtv1.VirtualMachineList{}
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace(infraNamespace))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(2))

	// The kubeconfig Secret deleted under a live cluster: reported, and
	// nothing on the infra cluster is touched; restored, all is as before.
	g.Expect(ext.Env.Client.Delete(ctx, infraSecret())).To(Succeed())
	eventually(t, tc.reason(running, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.InfraClusterSecretInvalidReason))
	g.Expect(condition(get(t, tc.c, running), infrav1.InfraClusterAvailableCondition)).To(ContainSubstring("infra"))
	g.Expect(get(t, tc.c, running).Status.Ready).To(BeTrue())
	g.Expect(ext.Env.Client.Create(ctx, infraSecret())).To(Succeed())
	eventually(t, tc.reason(running, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.AvailableReason))
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace(infraNamespace))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(2))

	// Deleting now removes everything: nothing of the outage is left.
	for _, km := range []*infrav1.KubevirtMachine{running, creating} {
		g.Expect(ext.Env.Client.Delete(ctx, km)).To(Succeed())
	}
	eventually(t, func() int {
		l := &infrav1.KubevirtMachineList{}
		_ = ext.Env.Client.List(ctx, l, client.InNamespace(tc.ns))
		return len(l.Items)
	}).Should(BeZero())
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace(infraNamespace))).To(Succeed())
	g.Expect(vms.Items).To(BeEmpty())
	secrets := &corev1.SecretList{}
	g.Expect(ext.Infra.Client.List(ctx, secrets, client.InNamespace(infraNamespace), client.HasLabels{infrav1.KubevirtMachineLabel})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty())
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

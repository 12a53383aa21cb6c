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
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// TestVirtAPIDown stops virt-api, whose webhooks the API server must call
// to admit a VirtualMachine: the machine says that its VM could not be
// created and why, retries with a backoff rather than in a loop, and once
// virt-api is back gets exactly one VM.
func TestVirtAPIDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	restart, err := w.Infra.StopComponent("virt-api")
	g.Expect(err).NotTo(HaveOccurred())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = restart()
		}
	})

	before := writes.count()
	km := tc.newMachine(t, fixture.MachineOptions{Name: "webhook-down"})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.CreateFailedReason))
	msg := condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)
	g.Expect(msg).To(ContainSubstring("retrying with backoff"))
	g.Expect(msg).To(ContainSubstring("failed calling webhook"))
	// 20 s of outage: a backoff doubling from 5 ms tries about a dozen
	// times, a loop thousands; the unchanged condition is not written
	// again.
	time.Sleep(20 * time.Second)
	creates, statusWrites := vmCreates(before, tc.ns), writesTo(before, "/namespaces/"+tc.ns+"/kubevirtmachines/webhook-down/status")
	t.Logf("during 20 s without virt-api: %d VM creates tried, %d status writes", creates, statusWrites)
	g.Expect(creates).To(BeNumerically("<=", 20))
	g.Expect(statusWrites).To(BeNumerically("<=", 3))
	g.Expect(list(t, tc.ns, &kubevirtv1.VirtualMachineList{})).To(BeZero())
	g.Expect(w.Env.Client.Get(ctx, keyOf(tc.ns, "webhook-down-userdata"), &corev1.Secret{})).NotTo(Succeed(), "nothing half-way")

	restarted = true
	g.Expect(restart()).To(Succeed())
	recovering := time.Now()
	NewWithT(t).Eventually(tc.provisioned(km)).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("provisioned %s after virt-api came back", time.Since(recovering).Round(time.Second))
	vms := &kubevirtv1.VirtualMachineList{}
	g.Expect(w.Env.Client.List(ctx, vms, client.InNamespace(tc.ns))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(1))
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
	ext, err := world.Start(world.Options{ExternalInfra: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(ext.Stop()).To(Succeed()) })
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

	g.Expect(ext.Infra.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}})).To(Succeed())
	tc := newTenantClusterOn(t, ext.Env.Client, fixture.TenantOptions{Mutate: func(kc *infrav1.KubevirtCluster) {
		kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Name: "infra"}
	}})
	infraSecret := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: tc.ns},
			Data: map[string][]byte{"kubeconfig": kubeconfig, "namespace": []byte("tenants")}}
	}
	g.Expect(ext.Env.Client.Create(ctx, infraSecret())).To(Succeed())
	running := tc.newMachine(t, fixture.MachineOptions{Name: "running"})
	eventually(t, tc.provisioned(running)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", running.Name, vm)).To(Succeed())
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
	g.Expect(infraGet(t, ext.Infra.Client, "tenants", running.Name, vm)).To(Succeed())
	g.Expect(vm.UID).To(Equal(runningUID), "the running VM was not replaced")
	vms := &kubevirtv1.VirtualMachineList{}
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace("tenants"))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(2))

	// The kubeconfig Secret deleted under a live cluster: reported, and
	// nothing on the infra cluster is touched; restored, all is as before.
	g.Expect(ext.Env.Client.Delete(ctx, infraSecret())).To(Succeed())
	eventually(t, tc.reason(running, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.InfraClusterSecretInvalidReason))
	g.Expect(condition(get(t, tc.c, running), infrav1.InfraClusterAvailableCondition)).To(ContainSubstring("infra"))
	g.Expect(get(t, tc.c, running).Status.Ready).To(BeTrue())
	g.Expect(ext.Env.Client.Create(ctx, infraSecret())).To(Succeed())
	eventually(t, tc.reason(running, infrav1.InfraClusterAvailableCondition)).Should(Equal(infrav1.AvailableReason))
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace("tenants"))).To(Succeed())
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
	g.Expect(ext.Infra.Client.List(ctx, vms, client.InNamespace("tenants"))).To(Succeed())
	g.Expect(vms.Items).To(BeEmpty())
	secrets := &corev1.SecretList{}
	g.Expect(ext.Infra.Client.List(ctx, secrets, client.InNamespace("tenants"), client.HasLabels{infrav1.KubevirtMachineLabel})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty())
}

// vmCreates counts the provider's VirtualMachine creates in ns since the
// first n writes, refused ones included.
func vmCreates(n int, ns string) int {
	return writesMatching(n, func(wr write) bool {
		return wr.method == http.MethodPost && strings.HasSuffix(wr.path, "/namespaces/"+ns+"/virtualmachines")
	})
}

// writesTo counts the provider's writes to a path since the first n.
func writesTo(n int, suffix string) int {
	return writesMatching(n, func(wr write) bool { return strings.HasSuffix(wr.path, suffix) })
}

func writesMatching(n int, match func(write) bool) int {
	writes.mu.Lock()
	defer writes.mu.Unlock()
	count := 0
	for _, wr := range writes.writes[n:] {
		if match(wr) {
			count++
		}
	}
	return count
}

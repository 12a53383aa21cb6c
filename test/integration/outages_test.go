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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
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
	// 10 s of outage: a backoff doubling from 5 ms tries about a dozen
	// times, a loop thousands; the unchanged condition is not written
	// again. (A longer outage only lengthens the backoff the recovery
	// below then waits out.)
	time.Sleep(10 * time.Second)
	creates, statusWrites := vmCreates(before, tc.ns), writesTo(before, "/namespaces/"+tc.ns+"/kubevirtmachines/webhook-down/status")
	t.Logf("during 10 s without virt-api: %d VM creates tried, %d status writes", creates, statusWrites)
	g.Expect(creates).To(BeNumerically("<=", 16))
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

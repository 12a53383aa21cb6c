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
	"errors"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// dropWait is how long a test waits on a connection it expects dropped.
const dropWait = 300 * time.Millisecond

// connect opens a connection in the simulated infra network, giving a
// dropped one dropWait.
func connect(from, to sim.Endpoint, port int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropWait)
	defer cancel()
	return w.Sim.Connect(ctx, from, to, "TCP", port)
}

// dropped matches the error of a connection the network dropped.
func dropped() OmegaMatcher {
	return WithTransform(func(err error) bool {
		var netErr net.Error
		return errors.As(err, &netErr) && netErr.Timeout()
	}, BeTrue())
}

// guestOf returns a machine's VM instance and where its guest's
// connections come from.
func guestOf(t *testing.T, tc *tenantCluster, km *infrav1.KubevirtMachine) sim.Endpoint {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	NewWithT(t).Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	from, err := w.Sim.GuestEndpoint(context.Background(), vmi)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return from
}

// TestNetworkPoliciesDecideConnections has two isolated tenants connect
// where the flow table says they may and may not, then removes a policy
// by hand and shows that what it allowed is dropped.
func TestNetworkPoliciesDecideConnections(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := ownedCluster(t, nil), ownedCluster(t, nil)
	type machines struct {
		cp, worker *infrav1.KubevirtMachine
		cpPod      *corev1.Pod
	}
	tenants := map[*tenantCluster]*machines{a: {}, b: {}}
	for tc, m := range tenants {
		eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
		m.cp = tc.newMachine(t, fixture.MachineOptions{Name: "cp", ControlPlane: true})
		// The worker joins through the control-plane Service only once a
		// control-plane VM runs behind it.
		m.cpPod = launcherPod(t, tc, m.cp)
		m.worker = tc.newMachine(t, fixture.MachineOptions{Name: "worker"})
	}
	// A's worker joined its own cluster, its connection to the control
	// plane allowed by the isolation policy.
	eventually(t, guestOutcome(w.Env.Client, a.ns, "worker")).Should(Equal("joined"))
	fromA := guestOf(t, a, tenants[a].worker)
	g.Expect(connect(fromA, sim.AddressEndpoint(tenants[a].cpPod.Status.PodIP), 6443)).To(Succeed())
	g.Expect(connect(fromA, sim.AddressEndpoint(tenants[b].cpPod.Status.PodIP), 6443)).To(dropped(), "another tenant's control plane")
	bWorker := launcherPod(t, b, tenants[b].worker)
	g.Expect(connect(fromA, sim.PodEndpoint(client.ObjectKeyFromObject(bWorker)), 10250)).To(dropped(), "another tenant's guest")
	g.Expect(connect(fromA, sim.PodEndpoint(client.ObjectKeyFromObject(tenants[a].cpPod)), 10250)).To(Succeed())

	// The api-server policy is what lets users reach A's control plane.
	// With the KubevirtCluster paused, the provider does not put it back.
	user := sim.AddressEndpoint("203.0.113.7")
	cpA := sim.PodEndpoint(client.ObjectKeyFromObject(tenants[a].cpPod))
	g.Expect(connect(user, cpA, 6443)).To(Succeed())
	kc := get(t, a.c, a.kc)
	kc.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"}
	g.Expect(a.c.Update(ctx, kc)).To(Succeed())
	// Once the controller says so, no reconcile puts the policy back.
	eventually(t, func() bool { return conditions.IsTrue(get(t, a.c, a.kc), clusterv1.PausedCondition) }).Should(BeTrue())
	g.Expect(w.Env.Client.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
		Namespace: a.ns, Name: kc.Name + "-api-server"}})).To(Succeed())
	eventually(t, func() error { return connect(user, cpA, 6443) }).Should(dropped())
	// Unpaused, the provider restores the policy and users get in again.
	kc = get(t, a.c, a.kc)
	delete(kc.Annotations, clusterv1.PausedAnnotation)
	g.Expect(a.c.Update(ctx, kc)).To(Succeed())
	eventually(t, func() error { return connect(user, cpA, 6443) }).Should(Succeed())
}

// TestNetworkPoliciesGateJoinAndSSHCheck puts a tenant without isolation
// in a namespace whose administrator denies all traffic: the worker's
// kubeadm join times out and the ssh check cannot connect. Turning
// isolation on opens port 22 to the provider, and the check passes.
func TestNetworkPoliciesGateJoinAndSSHCheck(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := ownedCluster(t, func(kc *infrav1.KubevirtCluster) { kc.Spec.Isolation.Mode = infrav1.IsolationDisabled })
	g.Expect(w.Env.Client.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	})).To(Succeed())
	eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
	// The control plane's guest joins (its kubeadm needs no connection to
	// do so here), so only the network stands between the check and
	// success.
	tc.reachable(t)
	cp := tc.newMachine(t, fixture.MachineOptions{Name: "cp", ControlPlane: true, Mutate: withCheck(infrav1.CheckStrategySSH)})
	launcherPod(t, tc, cp)
	tc.newMachine(t, fixture.MachineOptions{Name: "worker"})

	// kubeadm retries its discovery for 5 minutes (3 s scaled) from boot
	// before it gives up.
	var running time.Time
	eventually(t, func() bool {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if infraGet(t, w.Env.Client, tc.ns, "worker", vmi) != nil || vmi.Status.Phase != kubevirtv1.Running {
			return false
		}
		running = time.Now()
		return true
	}).Should(BeTrue())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, "worker")).Should(
		MatchRegexp(`^bootstrap-failed: kubeadm join: .* could not reach the control plane at .*:6443 within 5m0s: i/o timeout$`))
	g.Expect(time.Since(running)).To(BeNumerically(">", 1500*time.Millisecond), "the guest gave up only after retrying (the Running timestamp counts whole seconds)")
	// Until the guest's sshd is up, the check finds no route; then the
	// policy drops its connections.
	eventually(t, func() string { return condition(get(t, tc.c, cp), infrav1.BootstrapSucceededCondition) }).Should(
		MatchRegexp(`^False/CheckFailed: ssh probe of .*:22: .*timed out`))

	kc := get(t, tc.c, tc.kc)
	kc.Spec.Isolation.Mode = infrav1.IsolationEnabled
	g.Expect(tc.c.Update(ctx, kc)).To(Succeed())
	NewWithT(t).Eventually(tc.provisioned(cp)).WithTimeout(90 * time.Second).Should(Succeed())
	g.Expect(condition(get(t, tc.c, cp), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("verified host key"))
}

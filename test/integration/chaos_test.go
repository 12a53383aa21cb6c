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
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

const (
	// chaosMachines is how many machines the chaos test scales up to.
	chaosMachines = 20
	// chaosKills is how many times it kills the leading replica.
	chaosKills = 50
	// chaosLease is the test replicas' lease duration; a third of the
	// shipped 15 s, so that the crash kills' handovers stay short.
	chaosLease = 5 * time.Second
)

// replicas are the provider's replicas of the chaos test: two managers
// with leader election against the same API server, as the Deployment runs
// them, and their handover times.
type replicas struct {
	t         *testing.T
	w         *world.World
	running   []*testenv.Manager
	handovers []time.Duration
	// elected is when the current leader took over.
	elected time.Time
}

func (r *replicas) start() {
	r.t.Helper()
	m, err := testenv.StartManager(r.w.Env.Config, r.w.ProviderOptions(manager.Options{
		LeaderElection: true, LeaderElectionID: "capkv-chaos", ProviderNamespace: providerNamespace,
		LeaseDuration: chaosLease, RenewDeadline: chaosLease * 2 / 3, RetryPeriod: 200 * time.Millisecond,
		KubevirtMachineConcurrency: 10, RecheckInterval: 500 * time.Millisecond, NodeJoinTimeout: 24 * time.Hour,
		StatusSettleTime: 10 * time.Second,
	}))
	NewWithT(r.t).Expect(err).NotTo(HaveOccurred())
	r.running = append(r.running, m)
}

// leader waits for a replica to lead and returns its index.
func (r *replicas) leader() int {
	r.t.Helper()
	deadline := time.After(3 * chaosLease)
	for {
		for i, m := range r.running {
			// A replica that lost the Lease exits; it leads no more.
			if !errors.Is(m.Exited(), testenv.ErrRunning) {
				continue
			}
			select {
			case <-m.Elected():
				return i
			default:
			}
		}
		select {
		case <-deadline:
			r.t.Fatalf("no replica took the lease within %s", 3*chaosLease)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// competing waits until every replica runs for the lease.
func (r *replicas) competing() {
	r.t.Helper()
	deadline := time.After(3 * chaosLease)
	for _, m := range r.running {
		select {
		case <-m.Competing():
		case <-deadline:
			r.t.Fatalf("a replica did not run for the lease within %s", 3*chaosLease)
		}
	}
}

// leadFor lets the current leader work for between 200 ms and a second
// since it took over, before the next kill; its replacement standby
// starts meanwhile.
func (r *replicas) leadFor() {
	time.Sleep(time.Until(r.elected.Add(time.Duration(200+rand.IntN(800)) * time.Millisecond)))
}

// killLeader stops the leader mid-work, records how long the lease took
// to move to the standby, and starts a replacement as the Deployment's
// ReplicaSet would. It kills only once the standby runs for the lease: a crash
// before that adds the standby's own start (its caches' sync, seconds on
// a loaded machine) to the lease, and the test bounds the handover alone.
func (r *replicas) killLeader(crash bool) {
	r.t.Helper()
	i := r.leader()
	r.competing()
	killed := time.Now()
	// A killed replica's error is expected.
	if crash {
		_ = r.running[i].Crash()
	} else {
		_ = r.running[i].Stop()
	}
	r.running = slices.Delete(r.running, i, i+1)
	r.leader()
	r.elected = time.Now()
	r.handovers = append(r.handovers, time.Since(killed))
	// The replacement starts as the ReplicaSet starts it, beside the
	// handover; building its manager (seconds on a loaded machine) is not
	// part of the standby's takeover the test bounds.
	r.start()
}

func (r *replicas) stop() {
	for _, m := range r.running {
		_ = m.Stop()
	}
}

// TestChaosLeaderKills runs the provider as two replicas with leader
// election and kills the leading one 50 times while 20 machines are
// created, one in ten kills a crash that keeps the lease (SIGKILL, OOM),
// the others a stop that gives it up (SIGTERM); then it deletes the
// cluster, still killing. The provider must end with exactly one VM per
// machine and, after the deletion, nothing of the cluster on the infra
// cluster.
func TestChaosLeaderKills(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The replicas run in the package's world, in place of its provider.
	withoutSharedProvider(t)
	c := w.Env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}}); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	r := &replicas{t: t, w: w}
	r.start()
	r.start()
	t.Cleanup(r.stop)

	tc := newTenantClusterOn(t, c, fixture.TenantOptions{Owned: true, Mutate: func(kc *infrav1.KubevirtCluster) {
		kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{{Name: "extra", Spec: networkingv1.NetworkPolicySpec{}}}
	}})
	start := time.Now()
	r.elected = start
	var kms []*infrav1.KubevirtMachine
	for kill := range chaosKills {
		if kill%2 == 0 && len(kms) < chaosMachines {
			kms = append(kms, tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("chaos-%02d", len(kms)), Mutate: withRootDataVolume}))
		}
		// Let the new leader get into its work before the next kill.
		r.leadFor()
		r.killLeader(kill%10 == 9)
	}
	for _, km := range kms {
		NewWithT(t).Eventually(tc.provisioned(km)).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	}
	t.Logf("%d machines provisioned in %s across %d leader kills; handovers: %s", len(kms),
		time.Since(start).Round(time.Second), chaosKills, handoverSummary(r.handovers))
	g.Expect(kms).To(HaveLen(chaosMachines))

	// Exactly one of everything per machine.
	vms := &kubevirtv1.VirtualMachineList{}
	g.Expect(c.List(ctx, vms, client.InNamespace(tc.ns))).To(Succeed())
	g.Expect(vms.Items).To(HaveLen(chaosMachines), "one VM per machine")
	for _, vm := range vms.Items {
		g.Expect(vm.Annotations).To(HaveKeyWithValue(infrav1.OwnerAnnotation, tc.ns+"/"+vm.Name), "each VM made for its machine")
	}
	g.Expect(countIn(t, c, tc.ns, &cdiv1.DataVolumeList{})).To(Equal(chaosMachines))
	g.Expect(countIn(t, c, tc.ns, &kubevirtv1.VirtualMachineInstanceList{})).To(Equal(chaosMachines))
	secrets := &corev1.SecretList{}
	g.Expect(c.List(ctx, secrets, client.InNamespace(tc.ns), client.HasLabels{infrav1.KubevirtMachineLabel})).To(Succeed())
	g.Expect(secrets.Items).To(HaveLen(chaosMachines), "one user data Secret per machine")

	// Delete the cluster as Cluster API does, machines first, still
	// killing the leader.
	deleting := time.Now()
	for _, km := range kms {
		g.Expect(c.Delete(ctx, km)).To(Succeed())
	}
	for kill := range 5 {
		r.leadFor()
		r.killLeader(kill == 4)
	}
	NewWithT(t).Eventually(func() int { return countIn(t, c, tc.ns, &infrav1.KubevirtMachineList{}) }).
		WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(BeZero())
	g.Expect(c.Delete(ctx, tc.kc)).To(Succeed())
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(tc.kc), &infrav1.KubevirtCluster{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
	t.Logf("cluster deleted in %s", time.Since(deleting).Round(time.Second))
	for _, l := range []client.ObjectList{&kubevirtv1.VirtualMachineList{}, &kubevirtv1.VirtualMachineInstanceList{},
		&cdiv1.DataVolumeList{}, &networkingv1.NetworkPolicyList{}, &corev1.ServiceList{}} {
		g.Expect(countIn(t, c, tc.ns, l)).To(BeZero(), "%T left behind", l)
	}
	g.Expect(c.List(ctx, secrets, client.InNamespace(tc.ns), client.HasLabels{infrav1.KubevirtMachineLabel})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty())
	NewWithT(t).Eventually(func() int { return countIn(t, c, tc.ns, &corev1.PodList{}) }).
		WithTimeout(time.Minute).Should(BeZero(), "launcher pods left behind")

	// Every handover fit the lease: a stop hands over within a retry
	// period or two, a crash within the lease duration and a few retry
	// periods (client-go adds up to 20% jitter to each).
	t.Logf("handovers over all %d kills: %s", len(r.handovers), handoverSummary(r.handovers))
	g.Expect(slices.Max(r.handovers)).To(BeNumerically("<", chaosLease+3*time.Second))
}

// handoverSummary is the median and longest handover.
func handoverSummary(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s", s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
}

// countIn counts the objects of a kind in a namespace of c.
func countIn(t *testing.T, c client.Client, ns string, l client.ObjectList) int {
	t.Helper()
	NewWithT(t).Expect(c.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	return meta.LenList(l)
}

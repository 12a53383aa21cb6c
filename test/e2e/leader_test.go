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

package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
)

// What client-go's leader election logs (structured, level 0) when a
// replica runs for the Lease and when it takes it
// (tools/leaderelection/leaderelection.go).
const (
	runsForLease = "Attempting to acquire leader lease"
	tookLease    = "Successfully acquired lease"
)

// maxStopHandover bounds how long the Lease takes to move when the leader
// stops normally: it gives the Lease up as it exits, and the standby
// tries again within 1.76 s (the 800ms retry period plus client-go's
// jitter of up to 120%). maxCrashHandover bounds it when the leader dies
// holding it: the Lease expires after its duration (15 s), and the
// standby takes it at its next try.
const (
	maxStopHandover  = 2 * time.Second
	maxCrashHandover = 15*time.Second + 5*time.Second
)

// providerPods are the provider's pods the world runs, not being deleted.
func providerPods(ctx context.Context) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(c.List(ctx, pods, client.InNamespace(clusterctl.Namespace), client.MatchingLabels{"control-plane": "capkv-controller-manager"})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// leaseHolder is the identity holding the provider's leader Lease.
func leaseHolder(ctx context.Context) string {
	lease := &coordinationv1.Lease{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: clusterctl.Namespace, Name: manager.DefaultLeaderElectionID}, lease)).To(Succeed())
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// currentLog is the log of the pod's current container: the runner
// appends a restarted container's output after a line saying how the last
// one ended.
func currentLog(pod string) string {
	log := provider.Log(pod)
	if i := strings.LastIndex(log, "world: container "); i >= 0 {
		return log[i:]
	}
	return log
}

// stopLeader waits until the provider runs as a leader and a standby
// running for the Lease, then stops the leader: it deletes the leader's
// pod (SIGTERM, as a rollout or a drain stops it), or, with crash, kills
// its container (SIGKILL, as the OOM killer does), and returns how long
// the Lease took to move to another holder. A running replica whose
// current container's log says it took the Lease leads: one that loses it
// exits.
func stopLeader(ctx context.Context, crash bool) time.Duration {
	var leader corev1.Pod
	Eventually(func(g Gomega) {
		pods := providerPods(ctx)
		g.Expect(pods).To(HaveLen(2), "two replicas")
		leaders, standbys := 0, 0
		for _, p := range pods {
			switch log := currentLog(p.Name); {
			case strings.Contains(log, tookLease):
				leaders++
				leader = p
			case strings.Contains(log, runsForLease):
				standbys++
			}
		}
		g.Expect([]int{leaders, standbys}).To(Equal([]int{1, 1}), "one leader, one standby running for the Lease")
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), func() string { return provider.LogTails(20) })
	holder := leaseHolder(ctx)
	if crash {
		Expect(provider.Crash(leader.Name)).To(Succeed())
	} else {
		Expect(c.Delete(ctx, &leader)).To(Succeed())
	}
	stopped := time.Now()
	Eventually(func() string { return leaseHolder(ctx) }).WithTimeout(time.Minute).WithPolling(20*time.Millisecond).
		Should(SatisfyAll(Not(BeEmpty()), Not(Equal(holder))), func() string { return provider.LogTails(20) })
	return time.Since(stopped)
}

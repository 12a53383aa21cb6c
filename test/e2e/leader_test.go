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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// maxAfterRelease bounds how long the standby takes a Lease its leader
// gave up as it stopped: it tries again within 1.76 s (the 800ms retry
// period plus client-go's jitter of up to 120%), and the try's own
// requests take up to a second more on a loaded machine (2.05 s in all
// was seen); far below the 15 s a Lease held to its expiry takes.
// maxHandover bounds how long the Lease takes to move however the leader
// ended: one that dies holding it keeps it until it expires (15 s).
const (
	maxAfterRelease = 3 * time.Second
	maxHandover     = 15*time.Second + 5*time.Second
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

// handover is how the Lease moved once the leader was stopped.
type handover struct {
	// total is from the stop to another holder.
	total time.Duration
	// released says the leader gave the Lease up; afterRelease is from
	// then to another holder.
	released     bool
	afterRelease time.Duration
}

// stopLeader waits until the provider runs as a leader and a standby
// running for the Lease, then stops the leader: it deletes the leader's
// pod (SIGTERM, as a rollout or a drain stops it), or, with crash, kills
// its container (SIGKILL, as the OOM killer does), and follows the Lease
// through a watch, which sees every write of it, until another replica
// holds it. A running replica whose current container's log says it took
// the Lease leads: one that loses it exits.
func stopLeader(ctx context.Context, crash bool) handover {
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

	wc, err := client.NewWithWatch(w.Env.Config, client.Options{Scheme: c.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	lease := &coordinationv1.Lease{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: clusterctl.Namespace, Name: manager.DefaultLeaderElectionID}, lease)).To(Succeed())
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	watch, err := wc.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(clusterctl.Namespace),
		client.MatchingFields{"metadata.name": manager.DefaultLeaderElectionID}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: lease.ResourceVersion}})
	Expect(err).NotTo(HaveOccurred())
	defer watch.Stop()

	if crash {
		Expect(provider.Crash(leader.Name)).To(Succeed())
	} else {
		Expect(c.Delete(ctx, &leader)).To(Succeed())
	}
	stopped := time.Now()
	var h handover
	var released time.Time
	deadline := time.After(time.Minute)
	for {
		select {
		case e, ok := <-watch.ResultChan():
			Expect(ok).To(BeTrue(), "the Lease watch ended")
			l, isLease := e.Object.(*coordinationv1.Lease)
			if !isLease {
				continue
			}
			switch now := ptr.Deref(l.Spec.HolderIdentity, ""); {
			case now == "" && !h.released:
				h.released, released = true, time.Now()
			case now != "" && now != holder:
				h.total = time.Since(stopped)
				if h.released {
					h.afterRelease = time.Since(released)
				}
				return h
			}
		case <-deadline:
			Fail("no other replica took the Lease within a minute:\n" + provider.LogTails(20))
		}
	}
}

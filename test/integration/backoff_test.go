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
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/failurebackoff"
)

// TestFailureBackoffCapUnderClusterAPIBuilder checks that the cap the
// provider's controllers put on their retry wait holds when Cluster API's
// controller builder builds them, as it builds the provider's: the builder
// replaces a controller's rate limiter with its own (1 s plus 5 ms doubling
// per failure, up to 1000 s), and the cap lives in the queue it leaves
// alone. A reconcile that always fails is retried at the builder's pace
// (never sooner than its 1 s floor) until the wait reaches the cap, and
// then at the cap: without it, the tenth and eleventh waits would be 3.6 s
// and 6.1 s.
func TestFailureBackoffCapUnderClusterAPIBuilder(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "backoff-"}}
	g.Expect(w.Env.Client.Create(ctx, ns)).To(Succeed())
	defer func() { _ = w.Env.Client.Delete(context.Background(), ns) }()

	mgr, err := ctrl.NewManager(w.Env.Config, ctrl.Options{Scheme: w.Env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns.Name: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}})
	g.Expect(err).NotTo(HaveOccurred())
	const most = 1500 * time.Millisecond
	failing := &failingReconciler{}
	g.Expect(capicontroller.NewControllerManagedBy(mgr, ctrl.Log).
		For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{NewQueue: failurebackoff.NewQueue[reconcile.Request](most)}).
		Complete(ctx, failing)).To(Succeed())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(w.Env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "fails"}})).To(Succeed())

	const attempts = 12
	g.Eventually(failing.count).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", attempts))
	gaps := failing.gaps(attempts)
	for i, gap := range gaps {
		// The slack is for a busy machine's timers; the cap's absence
		// shows as waits of 2.3 s, 3.6 s and 6.1 s.
		g.Expect(gap).To(BeNumerically("<=", most+700*time.Millisecond), "wait %d of %v", i+1, gaps)
		g.Expect(gap).To(BeNumerically(">=", 900*time.Millisecond), "wait %d of %v: Cluster API's 1 s floor", i+1, gaps)
	}
}

// failingReconciler fails every reconcile and records when each began.
type failingReconciler struct {
	mu    sync.Mutex
	times []time.Time
}

func (r *failingReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times = append(r.times, time.Now())
	return reconcile.Result{}, errors.New("fails on purpose")
}

func (r *failingReconciler) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

// gaps are the waits between the first n reconciles.
func (r *failingReconciler) gaps(n int) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < n && i < len(r.times); i++ {
		gaps = append(gaps, r.times[i].Sub(r.times[i-1]))
	}
	return gaps
}

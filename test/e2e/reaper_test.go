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

// The reaper: deleting a cluster takes the world 12 to 20 s, most of it
// Cluster API stepping through its deletion phases (its Cluster controller
// requeues every 5 s while descendants remain). A spec whose subject is not
// deletion hands its cluster to the reaper, which deletes it at once and
// waits for it while the next spec runs. AfterSuite waits for every
// deletion and fails the suite, naming the spec, for any that left
// something behind. Specs about deletion (ClusterDeletionSpec, ScaleSpec's
// deletion side by side, the demo, IPAM and MachinePool clean-up checks)
// still wait for it themselves.

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// reaping is one namespace's deletion under way.
type reaping struct {
	spec, namespace string
	started         time.Time
	// done receives the deletion's outcome and when it ended.
	done chan reaped
}

// reaped is how a reaping ended.
type reaped struct {
	err   error
	ended time.Time
}

var (
	reapingMu sync.Mutex
	reapings  []reaping
)

// deleteClusterLater deletes a Cluster and leaves the wait until it and
// its infrastructure are gone to the reaper.
func deleteClusterLater(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Expect(c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	reap(ns)
}

// cleanUpLater is a Cluster API spec's PostNamespaceCreated for a spec
// that runs with SkipCleanup: after the spec's AfterEach dumped its
// resources, it deletes every Cluster of the spec's namespace and hands
// the namespace to the reaper, which deletes it, and the namespace
// ClusterClassChangesSpec keeps its class in, once the clusters are gone,
// as the spec's own clean-up would. next, if set, runs as the spec's hook.
func cleanUpLater(next func(framework.ClusterProxy, string)) func(framework.ClusterProxy, string) {
	return func(proxy framework.ClusterProxy, ns string) {
		DeferCleanup(func(ctx context.Context) {
			clusters := &clusterv1.ClusterList{}
			Expect(c.List(ctx, clusters, client.InNamespace(ns))).To(Succeed())
			for i := range clusters.Items {
				Expect(client.IgnoreNotFound(c.Delete(ctx, &clusters.Items[i]))).To(Succeed())
			}
			reap(ns, ns, ns+"-clusterclass")
		})
		if next != nil {
			next(proxy, ns)
		}
	}
}

// reap waits in the background until the deleted clusters of ns are gone
// with everything the provider made for them, then deletes namespaces.
func reap(ns string, namespaces ...string) {
	r := reaping{spec: CurrentSpecReport().FullText(), namespace: ns, started: time.Now(), done: make(chan reaped, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := reapNamespace(ctx, ns, namespaces)
		r.done <- reaped{err: err, ended: time.Now()}
	}()
	reapingMu.Lock()
	defer reapingMu.Unlock()
	reapings = append(reapings, r)
}

// reapNamespace polls ns until it holds none of the kinds a cluster's
// deletion removes, then deletes namespaces.
func reapNamespace(ctx context.Context, ns string, namespaces []string) error {
	left := "nothing listed yet"
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		// A list cut short by the deadline says nothing of what is left.
		if now := leftIn(ctx, ns); ctx.Err() == nil {
			left = now
		}
		return left == "", nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s still holds %s after %v:\n%s", ns, left, timeout, describe(context.Background(), ns))
	}
	for _, name := range namespaces {
		err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", name, err)
		}
	}
	return nil
}

// leftIn names what of a deleted cluster is still in ns, or what could
// not be listed; it is empty once all of it is gone.
func leftIn(ctx context.Context, ns string) string {
	var left []string
	for _, list := range []client.ObjectList{
		&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &infrav1.KubevirtClusterList{},
		&infrav1.KubevirtMachineList{}, &infrav1.KubevirtMachinePoolList{}, &kubevirtv1.VirtualMachineList{},
	} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			left = append(left, fmt.Sprintf("%T (%v)", list, err))
		} else if n := meta.LenList(list); n > 0 {
			left = append(left, fmt.Sprintf("%d of %T", n, list))
		}
	}
	return strings.Join(left, ", ")
}

// waitReaped waits for every deletion handed to the reaper, writes how
// long each took, and returns the failures, each with the spec that
// started it.
func waitReaped() error {
	reapingMu.Lock()
	defer reapingMu.Unlock()
	var errs []error
	for _, r := range reapings {
		end := <-r.done
		GinkgoWriter.Printf("reaped %s in %.1f s (%s)\n", r.namespace, end.ended.Sub(r.started).Seconds(), r.spec)
		if end.err != nil {
			errs = append(errs, fmt.Errorf("the clean-up of %q: %w", r.spec, end.err))
		}
	}
	reapings = nil
	return errors.Join(errs...)
}

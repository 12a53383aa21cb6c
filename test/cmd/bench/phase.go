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

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// startWorld starts a fresh world with every simulated latency at zero.
// The floor and the provider's run both start theirs here, so that they
// differ only in the API server's audit flags.
func startWorld(o options, name string, apiServerArgs map[string]string) (*world.World, error) {
	simOpts := sim.DefaultOptions()
	simOpts.TimeScale = 0
	fmt.Printf(">> %s: starting a world with every simulated latency at zero\n", name)
	return world.Start(world.Options{WithCAPI: true, Sim: &simOpts, Nodes: infraNodes(o.machines),
		WithoutProviderCRDs: o.noProvider, APIServerArgs: apiServerArgs, CAPIProductionDefaults: o.capiProductionDefaults})
}

// phase is one timed provisioning of every cluster in a world.
type phase struct {
	// name prefixes the progress lines.
	name string
	// mutate rewrites the template's objects before they are created.
	mutate func(*unstructured.Unstructured) error
	// provider, when set, is the process whose exit ends the wait early.
	provider *providerProcess
	// clock, when set, times the root disks' stages; measure sets it.
	clock **stageClock
	// timeline, when set, notes each cluster's and machine's milestones.
	timeline *timeline
	// kubevirtMachines says this provider's KubevirtMachines are there to
	// watch.
	kubevirtMachines bool
}

// measure creates the clusters and returns when every Machine was
// provisioned and when every Machine had a Node, counted from the first
// cluster's creation.
func (ph phase) measure(ctx context.Context, w *world.World, o options) (provisioned, nodeRefs time.Duration, err error) {
	// The Machine cache ends with the phase, before its world is stopped.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The watches start first, so that they see every root disk's phases.
	machines, err := ph.machineCache(ctx, w)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if ph.timeline != nil {
		ph.timeline.start = start
	}
	if err := createClusters(ctx, w.Env.Client, o, ph.mutate); err != nil {
		return 0, 0, err
	}
	fmt.Printf(">> %s: %d clusters with %d machines created from %s\n", ph.name, o.clusters, o.machines, o.template)
	return ph.waitFor(ctx, machines, o, start)
}

// createClusters creates the tenant clusters from the template, one
// control-plane machine each, the workers spread evenly.
func createClusters(ctx context.Context, c client.Client, o options, mutate func(*unstructured.Unstructured) error) error {
	perCluster := o.machines / o.clusters
	for i := range o.clusters {
		n := perCluster
		if i == o.clusters-1 {
			n = o.machines - perCluster*(o.clusters-1)
		}
		ns := fmt.Sprintf("bench-%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		vars := map[string]string{}
		maps.Copy(vars, o.vars)
		maps.Copy(vars, map[string]string{
			"CLUSTER_NAME": ns, "NAMESPACE": ns, "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": fmt.Sprint(n - 1),
		})
		if err := world.ApplyTemplateFileWith(ctx, c, o.template, vars, mutate); err != nil {
			return err
		}
	}
	return nil
}

// machineCache watches Machines, so that the benchmark decodes each change
// once instead of listing every Machine each time it looks; with clock
// set, it also times the root disks' stages there, and with timeline set,
// the milestones.
func (ph phase) machineCache(ctx context.Context, w *world.World) (cache.Cache, error) {
	clock := ph.clock
	c, err := cache.New(w.Env.Config, cache.Options{Scheme: w.Env.Scheme, ByObject: map[client.Object]cache.ByObject{}})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &clusterv1.Machine{}); err != nil {
		return nil, err
	}
	if clock != nil {
		if *clock, err = startStageClock(ctx, c); err != nil {
			return nil, err
		}
	}
	if ph.timeline != nil {
		if err := ph.timeline.watch(ctx, c, ph.kubevirtMachines); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the Machine cache did not sync")
	}
	return c, nil
}

// waitFor waits until every Machine's infrastructure is provisioned and
// every Machine has a Node, and returns when each happened. It reads only
// Cluster API's Machines, so it works for any infrastructure provider.
func (ph phase) waitFor(ctx context.Context, c client.Reader, o options, start time.Time) (provisioned, nodeRefs time.Duration, err error) {
	total, deadline := o.machines, start.Add(o.timeout)
	last := ""
	for time.Now().Before(deadline) {
		if err := ph.provider.exited(); err != nil {
			return 0, 0, err
		}
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines); err != nil {
			return 0, 0, err
		}
		ready, withNode := 0, 0
		for _, m := range machines.Items {
			if ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
				ready++
			}
			if m.Status.NodeRef.IsDefined() {
				withNode++
			}
		}
		// More Machines than asked for can exist for a while (a remediation
		// or a rollout); all of them must be there.
		if provisioned == 0 && ready >= total {
			provisioned = time.Since(start)
		}
		if withNode >= total && provisioned != 0 {
			return provisioned, time.Since(start), nil
		}
		if line := fmt.Sprintf("%d/%d provisioned, %d/%d with a Node", ready, total, withNode, total); line != last {
			fmt.Printf(">> %s: %6.1fs %s\n", ph.name, time.Since(start).Seconds(), line)
			last = line
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, 0, fmt.Errorf("%s: not all %d machines were ready within %s", ph.name, total, o.timeout)
}

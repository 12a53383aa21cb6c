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

// Command bench provisions many machines in the sandbox's world with every
// simulated latency at zero and reports how fast the provider is and what
// it costs: seconds until every Machine's infrastructure is provisioned and
// every Machine has a Node, the provider's API requests per machine by verb
// as the API server's audit log counts them, its CPU seconds and peak
// memory, and the imports and clones CDI did. It measures whatever provider
// runs in the world, so two can be compared (docs/benchmark.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// providerUser is who the measured provider authenticates as; the audit
// log counts this user's requests and nobody else's.
const providerUser = "bench-provider"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	machines, clusters int
	noProvider         bool
	providerCmd        string
	crds               string
	template           string
	timeout            time.Duration
	out                string
}

func parseFlags() (options, error) {
	root := testenv.RepoRoot()
	o := options{}
	flag.IntVar(&o.machines, "machines", 100, "machines to provision, control planes included")
	flag.IntVar(&o.clusters, "clusters", 4, "tenant clusters to spread them over (one control-plane machine each)")
	flag.BoolVar(&o.noProvider, "no-provider", false, "start the world without this provider's CRDs; give --crds and --provider-cmd for the provider to measure")
	flag.StringVar(&o.providerCmd, "provider-cmd", defaultProviderCmd(root), "the provider's manager, run by sh with KUBECONFIG set to a kubeconfig for the measured user")
	flag.StringVar(&o.crds, "crds", "", "a YAML file or directory whose CustomResourceDefinitions are installed before the provider starts (with --no-provider)")
	flag.StringVar(&o.template, "template", filepath.Join(root, "templates", "cluster-template.yaml"), "the clusterctl template of each tenant cluster")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long provisioning may take")
	flag.StringVar(&o.out, "out", filepath.Join(root, "out", "bench.json"), "where the JSON result goes")
	flag.Parse()
	if o.clusters < 1 || o.machines < 2*o.clusters {
		return o, errors.New("need at least 2 machines per cluster")
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	world.QuietLogs()
	// Interrupted, the benchmark still stops the provider and the world, so
	// no API server, etcd or data directory is left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	outDir := filepath.Dir(o.out)
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return err
	}
	audit, err := newAudit(outDir, providerUser)
	if err != nil {
		return err
	}
	simOpts := sim.DefaultOptions()
	simOpts.TimeScale = 0
	fmt.Println(">> starting the world with every simulated latency at zero")
	w, err := world.Start(world.Options{WithCAPI: true, Sim: &simOpts, Nodes: infraNodes(o.machines),
		WithoutProviderCRDs: o.noProvider, APIServerArgs: audit.apiServerArgs()})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	if o.crds != "" {
		n, err := installCRDs(w.Env.Config, o.crds)
		if err != nil {
			return err
		}
		fmt.Printf(">> installed %d CRDs from %s\n", n, o.crds)
	}
	kubeconfig := filepath.Join(outDir, "bench-provider.kubeconfig")
	if err := w.WriteKubeconfig(kubeconfig, providerUser); err != nil {
		return err
	}
	provider, err := startProvider(o.providerCmd, kubeconfig, filepath.Join(outDir, "bench-provider.log"))
	if err != nil {
		return err
	}
	defer provider.stop()
	fmt.Printf(">> provider running as pid %d: %s\n", provider.pid(), o.providerCmd)

	res := Result{Provider: o.providerCmd, Machines: o.machines, Clusters: o.clusters, Date: time.Now().UTC().Format(time.RFC3339)}
	start := time.Now()
	if err := createClusters(ctx, w.Env.Client, o); err != nil {
		return err
	}
	fmt.Printf(">> %d clusters with %d machines created from %s\n", o.clusters, o.machines, o.template)
	machines, err := machineCache(ctx, w)
	if err != nil {
		return err
	}
	provisioned, nodeRefs, err := waitFor(ctx, machines, o.machines, start, o.timeout, provider)
	if err != nil {
		return err
	}
	res.SecondsToProvisioned, res.SecondsToNodeRefs = provisioned.Seconds(), nodeRefs.Seconds()
	res.Imports, res.Clones = w.Sim.Counters.Get(sim.Imports), w.Sim.Counters.Get(sim.Clones)
	if res.ProviderCPUSeconds, res.ProviderPeakMemoryMiB, err = provider.usage(); err != nil {
		return err
	}
	counts, err := audit.count()
	if err != nil {
		return err
	}
	res.setRequests(counts)
	printTable(res)
	if err := res.write(o.out); err != nil {
		return err
	}
	fmt.Println(">> wrote", o.out)
	return nil
}

// createClusters creates the tenant clusters from the template, one
// control-plane machine each, the workers spread evenly.
func createClusters(ctx context.Context, c client.Client, o options) error {
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
		if err := world.ApplyTemplateFile(ctx, c, o.template, map[string]string{
			"CLUSTER_NAME": ns, "NAMESPACE": ns, "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": fmt.Sprint(n - 1),
		}); err != nil {
			return err
		}
	}
	return nil
}

// machineCache watches Machines, so that the benchmark decodes each change
// once instead of listing every Machine each time it looks.
func machineCache(ctx context.Context, w *world.World) (cache.Cache, error) {
	c, err := cache.New(w.Env.Config, cache.Options{Scheme: w.Env.Scheme, ByObject: map[client.Object]cache.ByObject{}})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &clusterv1.Machine{}); err != nil {
		return nil, err
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
func waitFor(ctx context.Context, c client.Reader, total int, start time.Time, timeout time.Duration, p *providerProcess) (provisioned, nodeRefs time.Duration, err error) {
	deadline := start.Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
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
			fmt.Printf(">> %6.1fs %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, 0, fmt.Errorf("not all %d machines were ready within %s", total, timeout)
}

// infraNodes gives the machines room: 256Gi nodes take about 55 of the
// template's 4Gi VMs, and at least 40 per node leaves headroom, over three
// zones as in the sandbox.
func infraNodes(machines int) []sim.NodeSpec {
	n := max(3, (machines+39)/40)
	nodes := make([]sim.NodeSpec, n)
	for i := range nodes {
		zone := string(rune('a' + i%3))
		nodes[i] = sim.NodeSpec{Name: fmt.Sprintf("infra-%s-%d", zone, i/3), Zone: "zone-" + zone, CPU: "64", Memory: "256Gi"}
	}
	return nodes
}

func defaultProviderCmd(root string) string {
	return strings.Join([]string{filepath.Join(root, "bin", "manager"),
		"--enable-webhooks=false", "--insecure-diagnostics", "--diagnostics-address=127.0.0.1:0", "--health-addr=127.0.0.1:0",
		"--provider-namespace=" + world.ProviderNamespace, "--isolation-ip-families=IPv4"}, " ")
}

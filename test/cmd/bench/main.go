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
// runs in the world, so two can be compared (docs/benchmark.md). First it
// provisions the same clusters with the world's instant test provider, the
// floor, so that the provider's seconds can be read as a ratio to it.
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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	floor, floorOnly   bool
	capiFloor          bool
	// kubevirtFloor also measures the KubeVirt floor (with floor).
	kubevirtFloor bool
	// capiProductionDefaults runs Cluster API with its release's defaults
	// in every phase.
	capiProductionDefaults bool
	// rest is how long the provider is watched after every Machine has
	// its Node.
	rest time.Duration
	// storageClass holds the root disks and golden volumes.
	storageClass string
	// vars are template variables set in every phase, besides the
	// cluster's name, namespace and machine counts.
	vars templateVars
}

// templateVars collects repeated --var KEY=VALUE flags.
type templateVars map[string]string

func (v templateVars) String() string { return fmt.Sprint(map[string]string(v)) }

func (v templateVars) Set(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	v[key] = value
	return nil
}

func parseFlags() (options, error) {
	root := testenv.RepoRoot()
	o := options{vars: templateVars{}}
	flag.IntVar(&o.machines, "machines", 100, "machines to provision, control planes included")
	flag.IntVar(&o.clusters, "clusters", 4, "tenant clusters to spread them over (one control-plane machine each)")
	flag.BoolVar(&o.noProvider, "no-provider", false, "start the world without this provider's CRDs; give --crds and --provider-cmd for the provider to measure")
	flag.StringVar(&o.providerCmd, "provider-cmd", defaultProviderCmd(root), "the provider's manager, run by sh with KUBECONFIG set to a kubeconfig for the measured user")
	flag.StringVar(&o.crds, "crds", "", "a YAML file or directory whose CustomResourceDefinitions are installed before the provider starts (with --no-provider)")
	flag.StringVar(&o.template, "template", filepath.Join(root, "templates", "cluster-template.yaml"), "the clusterctl template of each tenant cluster")
	flag.StringVar(&o.storageClass, "storage-class", world.CSICloneClass, "the infra storage class of the root disks and golden volumes: "+
		world.CSICloneClass+" (CSI clones, as on Ceph RBD and most production storage), "+world.SnapshotClass+" (a snapshot, then a volume restored from it), "+world.StandardClass+" (host-assisted copies, as on local and NFS storage) or "+world.WFFCClass+" (copies, binding on first use)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long provisioning may take")
	flag.StringVar(&o.out, "out", filepath.Join(root, "out", "bench.json"), "where the JSON result goes")
	flag.BoolVar(&o.floor, "floor", true, "first measure the floor: the same clusters in a fresh world with the world's instant test infrastructure provider (docs/benchmark.md)")
	flag.DurationVar(&o.rest, "rest", 5*time.Minute, "after every Machine has its Node, how long to count the provider's requests at rest (0: not at all)")
	flag.BoolVar(&o.capiFloor, "capi-floor", true, "with --floor, measure the Cluster API floor (context only; false saves its phase at 1,000 machines)")
	flag.BoolVar(&o.kubevirtFloor, "kubevirt-floor", true, "with --floor, also measure the KubeVirt floor: the same clusters in a fresh world with an oracle provider that does only what any KubeVirt provider must (docs/benchmark.md)")
	flag.BoolVar(&o.capiProductionDefaults, "capi-production-defaults", false, "run Cluster API as its release does (a 30 s ClusterCache retry) instead of with the world's 2 s retry, in every phase")
	flag.BoolVar(&o.floorOnly, "floor-only", false, "measure the floors alone, print their seconds and write nothing")
	flag.Var(o.vars, "var", "a template variable KEY=VALUE set in every phase (repeatable), e.g. CAPKV_NODE_STARTUP_TIMEOUT_SECONDS=1800")
	flag.Parse()
	o.floor = o.floor || o.floorOnly
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
	if err := os.MkdirAll(filepath.Dir(o.out), 0o750); err != nil {
		return err
	}
	res := Result{Provider: o.providerCmd, Machines: o.machines, Clusters: o.clusters, CAPIProductionDefaults: o.capiProductionDefaults, Variables: o.vars, Date: time.Now().UTC().Format(time.RFC3339)}
	// The floor goes first: it is the shorter run and the one that fails
	// on a template it cannot translate, so such a mistake shows within a
	// minute rather than after the provider's run, and the provider's
	// table, what the run is for, is printed last. Each phase has its own
	// world, so neither inherits the other's objects or tenants.
	if o.floor && o.capiFloor {
		floorProvisioned, floorNodeRefs, floorTimeline, err := runFloor(ctx, o)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		res.FloorSecondsToProvisioned, res.FloorSecondsToNodeRefs = floorProvisioned.Seconds(), floorNodeRefs.Seconds()
		res.FloorTimeline = &floorTimeline
	}
	if o.floor && o.kubevirtFloor {
		provisioned, nodeRefs, timeline, cpu, err := runKubeVirtFloor(ctx, o)
		if err != nil {
			return fmt.Errorf("KubeVirt floor: %w", err)
		}
		res.KubeVirtFloorCPUByProcess = cpu
		res.KubeVirtFloorSecondsToProvisioned, res.KubeVirtFloorSecondsToNodeRefs = provisioned.Seconds(), nodeRefs.Seconds()
		res.KubeVirtFloorTimeline = &timeline
	}
	if o.floorOnly {
		printFloorTimelines(res)
		return nil
	}
	if err := runProvider(ctx, o, &res); err != nil {
		return err
	}
	res.setRatios()
	printTable(res)
	printFloorTimelines(res)
	fmt.Println("\nthe provider's timeline:")
	printTimeline(res.Timeline)
	if err := res.write(o.out); err != nil {
		return err
	}
	fmt.Println(">> wrote", o.out)
	return nil
}

// printFloorTimelines prints the timelines of the floors that were
// measured.
func printFloorTimelines(res Result) {
	if res.FloorTimeline != nil {
		fmt.Println("\nthe Cluster API floor's timeline:")
		printTimeline(*res.FloorTimeline)
	}
	if res.KubeVirtFloorTimeline != nil {
		fmt.Println("\nthe KubeVirt floor's timeline:")
		printTimeline(*res.KubeVirtFloorTimeline)
	}
}

// runProvider measures the provider in a world of its own: it starts the
// world with the API server's audit log on, runs the provider's process,
// and fills in res.
func runProvider(ctx context.Context, o options, res *Result) error {
	outDir := filepath.Dir(o.out)
	audit, err := newAudit(outDir, providerUser)
	if err != nil {
		return err
	}
	w, err := startWorld(o, "provider", audit.apiServerArgs())
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

	var clock *stageClock
	tl := newTimeline()
	var provisioned, nodeRefs time.Duration
	res.CPUByProcess, err = whileMeasuring(func() (err error) {
		provisioned, nodeRefs, err = phase{name: "provider", provider: provider, clock: &clock, timeline: tl, kubevirtMachines: !o.noProvider,
			mutate: onStorageClass(o.storageClass)}.measure(ctx, w, o)
		return err
	})
	if err != nil {
		return err
	}
	res.Timeline = tl.summary()
	before, err := untilVMCreated(ctx, w.Env.Client)
	if err != nil {
		return err
	}
	res.Stages = clock.stages(before)
	if res.CloneMethods, err = cloneMethods(ctx, w.Env.Client); err != nil {
		return err
	}
	res.SecondsToProvisioned, res.SecondsToNodeRefs = provisioned.Seconds(), nodeRefs.Seconds()
	res.Imports, res.Clones = w.Sim.Counters.Get(sim.Imports), w.Sim.Counters.Get(sim.Clones)
	if res.ProviderCPUSeconds, res.ProviderPeakMemoryMiB, err = provider.usage(); err != nil {
		return err
	}
	// At rest, nothing changes: every request the provider makes now is
	// one it did not need to (a resync, a poll, a status write).
	restFrom := time.Time{}
	if o.rest > 0 {
		fmt.Printf(">> provider: every Machine has its Node; counting its requests at rest for %s\n", o.rest)
		restFrom = time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.rest):
		}
		if err := provider.exited(); err != nil {
			return err
		}
	}
	reqs, err := audit.requests()
	if err != nil {
		return err
	}
	res.setRequests(reqs, tl.infraMachines(), restFrom, o.rest)
	return nil
}

// onStorageClass puts every KubevirtMachineTemplate's root disk, and so
// its golden volume, on the storage class.
func onStorageClass(class string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if u.GetKind() != "KubevirtMachineTemplate" || class == "" {
			return nil
		}
		return unstructured.SetNestedField(u.Object, class, "spec", "template", "spec", "rootDisk", "storageClassName")
	}
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

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

// Command sandbox starts the test world (a real API server, etcd, scheduler
// and controller-manager, the real Cluster API controllers, the real
// KubeVirt and CDI control planes with their node parts simulated) with
// this provider's manager wired as main.go wires it, writes
// a kubeconfig for kubectl and clusterctl, creates a demo tenant cluster from
// templates/cluster-template.yaml, and shows its progress as a tree. See
// docs/sandbox.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/monitoring"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() error {
	exitAfterDemo := flag.Bool("exit-after-demo", false, "exit with a summary once the demo cluster is ready (non-zero if it is not ready within --timeout)")
	noProvider := flag.Bool("no-provider", false, "start the world without this provider's CRDs, manager and demo, for another provider (or an older build of this one) to be installed and measured")
	noDemo := flag.Bool("no-demo", false, "create no demo cluster")
	kubeconfigPath := flag.String("write-kubeconfig", filepath.Join(testenv.RepoRoot(), "out", "sandbox.kubeconfig"), "where to write the kubeconfig of the management cluster")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long the demo cluster may take to become ready")
	keepState := flag.Bool("keep-state", false, "keep the world's state in --state-dir, and resume from it if it is there")
	stateDir := flag.String("state-dir", filepath.Join(testenv.RepoRoot(), "out", "sandbox-state"), "where --keep-state keeps the world's state")
	timeScale := flag.Float64("time-scale", 0.01, "multiplier of every simulated latency (0: instant, 1: real time)")
	withPrometheus := flag.Bool("prometheus", false, "run the real Prometheus (bin/prometheus) scraping the provider's metrics endpoint with the shipped ServiceMonitor settings, RBAC and alerts, and print its URL")
	alertSpeedup := flag.Float64("alert-speedup", 10, "with --prometheus, divide the shipped alerts' waits by this, as machines come up faster here than on a real infra cluster")
	panelsDir := flag.String("panels", "", "once the demo cluster is ready, write the dashboard's main panels as PNG files into this directory, drawn from the real Prometheus' data (implies --prometheus)")
	flag.Parse()

	world.QuietLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	step("starting the world: kube-apiserver, etcd, kube-scheduler, kube-controller-manager, Cluster API controllers, KubeVirt and CDI simulator")
	opts := sim.DefaultOptions()
	opts.TimeScale = *timeScale
	wo := world.Options{WithCAPI: true, Sim: &opts, WithoutProviderCRDs: *noProvider}
	if *keepState {
		wo.StateDir = *stateDir
		if _, err := os.Stat(filepath.Join(*stateDir, "etcd")); err == nil {
			step("resuming from the state kept in " + *stateDir)
		} else {
			step("keeping the state in " + *stateDir + " for the next start")
		}
	}
	w, err := world.Start(wo)
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the world")
		if err := w.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox:", err)
		}
	}()
	step(fmt.Sprintf("world up in %s", time.Since(start).Round(100*time.Millisecond)))

	var prom *monitoring.Server
	if !*noProvider {
		o := manager.Options{EnableWebhooks: true}
		metricsAddr := ""
		if *withPrometheus || *panelsDir != "" {
			if o.Metrics, metricsAddr, err = monitoring.ProviderMetrics(); err != nil {
				return err
			}
		}
		// Served as a real install serves them, so that the sandbox refuses
		// what a real management cluster refuses.
		stopProvider, err := w.StartProvider(o)
		if err != nil {
			return err
		}
		defer func() {
			if err := stopProvider(); err != nil {
				fmt.Fprintln(os.Stderr, "sandbox: provider:", err)
			}
		}()
		step("provider manager started (manager.New, as main.go builds it), serving its admission webhooks")
		if metricsAddr != "" {
			if prom, err = startPrometheus(ctx, w, metricsAddr, *alertSpeedup); err != nil {
				return err
			}
			defer func() {
				if err := prom.Stop(); err != nil {
					fmt.Fprintln(os.Stderr, "sandbox: prometheus:", err)
				}
			}()
		}
	}
	if err := w.WriteKubeconfig(*kubeconfigPath, world.AdminUser); err != nil {
		return err
	}
	step("kubeconfig written: export KUBECONFIG=" + *kubeconfigPath + " (kubectl and clusterctl work against it)")

	if *noProvider {
		step("no provider: install your provider's CRDs and run its manager with this kubeconfig (docs/benchmark.md)")
	}
	if *noDemo || *noProvider {
		return wait(ctx)
	}
	c := w.Env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
		return err
	}
	demoStart := time.Now()
	existing := &clusterv1.Cluster{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "demo"}, existing); {
	case err == nil:
		step("the demo cluster exists (kept state): waiting for its guests to join their tenant cluster again")
		if err := rejoined(ctx, w, c, ns.Name, *timeout); err != nil {
			return err
		}
	case apierrors.IsNotFound(err):
		step("creating the demo cluster from templates/cluster-template.yaml (clusterctl template processing, the template's defaults)")
		if err := world.ApplyClusterTemplate(ctx, c, map[string]string{"CLUSTER_NAME": "demo", "NAMESPACE": ns.Name,
			"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "3"}); err != nil {
			return err
		}
	default:
		return err
	}
	ready, err := follow(ctx, c, ns.Name, "demo", *timeout)
	if err != nil {
		return err
	}
	if ready {
		step(fmt.Sprintf("the demo cluster is ready after %s", time.Since(demoStart).Round(100*time.Millisecond)))
		fmt.Printf("\nsummary: demo cluster ready in %s; simulator: %d imports, %d clones, %d guests joined\n",
			time.Since(demoStart).Round(100*time.Millisecond), w.Sim.Counters.Get(sim.Imports), w.Sim.Counters.Get(sim.Clones), w.Sim.Counters.Get(sim.GuestsJoined))
	}
	if ready && *panelsDir != "" {
		if err := writePanels(ctx, prom, *panelsDir, demoStart); err != nil {
			return err
		}
	}
	if *exitAfterDemo {
		if !ready {
			return errors.New("the demo cluster did not become ready in time")
		}
		return nil
	}
	step("staying up; press Ctrl-C to stop")
	return wait(ctx)
}

// follow prints the tree whenever it changes until the cluster is ready,
// the timeout passes, or the sandbox is interrupted.
func follow(ctx context.Context, c client.Client, ns, name string, timeout time.Duration) (bool, error) {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		out, done, err := tree(ctx, c, ns, name)
		if err == nil && out != last {
			fmt.Printf("\n%s\n%s", time.Now().Format(time.TimeOnly), out)
			last = out
		}
		if done {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-deadline:
			return false, nil
		case <-tick.C:
		}
	}
}

// rejoined waits until the Node of every Machine that has one is back in
// the in-memory tenant cluster, which a resumed world rebuilds as the
// simulated guests join again: until then the kept status is stale.
func rejoined(ctx context.Context, w *world.World, c client.Client, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return err
		}
		missing := 0
		for _, m := range machines.Items {
			key := client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}
			if m.Status.NodeRef.IsDefined() {
				if _, err := w.Workloads.Node(ctx, key, m.Status.NodeRef.Name); err != nil {
					missing++
				}
			}
		}
		if missing == 0 {
			step(fmt.Sprintf("all %d machines' Nodes are back", len(machines.Items)))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Nodes did not come back within %s", missing, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startPrometheus runs the real Prometheus against the provider's metrics
// endpoint at addr, authenticated as the service account the shipped RBAC
// binds.
func startPrometheus(ctx context.Context, w *world.World, addr string, speedup float64) (*monitoring.Server, error) {
	token, err := monitoring.ScraperToken(ctx, w.Env.Config)
	if err != nil {
		return nil, err
	}
	prom, err := monitoring.Start(ctx, monitoring.Options{Target: addr, Token: token, Speedup: speedup})
	if err != nil {
		return nil, err
	}
	if err := prom.WaitTargetUp(ctx, time.Minute); err != nil {
		return nil, errors.Join(err, prom.Stop())
	}
	step(fmt.Sprintf("Prometheus scrapes the provider at https://%s/metrics (alerts' waits divided by %g); query it at %s/api/v1/query", addr, speedup, prom.URL))
	return prom, nil
}

// writePanels draws the dashboard's main panels over the demo's life,
// once Prometheus has scraped the ready state.
func writePanels(ctx context.Context, prom *monitoring.Server, dir string, since time.Time) error {
	if err := prom.WaitScrapedAfter(ctx, time.Now()); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	files, err := prom.RenderPanels(ctx, monitoring.MainPanels, since.Add(-5*time.Second), time.Now(), dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		step("panel written: " + f)
	}
	return nil
}

func wait(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func step(msg string) {
	fmt.Printf(">> %s %s\n", time.Now().Format(time.TimeOnly), msg)
}

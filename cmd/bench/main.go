// Command bench provisions many machines in the sandbox's world with every
// simulated latency at zero and reports how fast the provider is and what
// it costs: seconds until every KubevirtMachine is provisioned and every
// Machine has a Node, the provider's API requests per machine by verb, its
// CPU seconds and peak memory, and the imports and clones CDI did. It
// measures whatever provider runs in the world, so two can be compared
// (docs/benchmark.md).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// Result is what one run measured; it is written as JSON.
type Result struct {
	Provider              string             `json:"provider"`
	Machines              int                `json:"machines"`
	Clusters              int                `json:"clusters"`
	SecondsToProvisioned  float64            `json:"secondsToProvisioned"`
	SecondsToNodeRefs     float64            `json:"secondsToNodeRefs"`
	RequestsPerMachine    map[string]float64 `json:"requestsPerMachine,omitempty"`
	RequestsTotal         float64            `json:"requestsTotal,omitempty"`
	ProviderCPUSeconds    float64            `json:"providerCPUSeconds,omitempty"`
	ProviderPeakMemoryMiB float64            `json:"providerPeakMemoryMiB,omitempty"`
	Imports               int64              `json:"imports"`
	Clones                int64              `json:"clones"`
	Date                  string             `json:"date"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	machines := flag.Int("machines", 100, "machines to provision, control planes included")
	clusters := flag.Int("clusters", 4, "tenant clusters to spread them over (one control-plane machine each)")
	managerBin := flag.String("manager", filepath.Join(testenv.RepoRoot(), "bin", "manager"), "this provider's manager binary, run as its own process")
	noProvider := flag.Bool("no-provider", false, "do not start this provider: measure the one installed in the world (give --metrics-url and --pid to get its requests and usage)")
	metricsURL := flag.String("metrics-url", "", "with --no-provider: the provider's Prometheus endpoint")
	pid := flag.Int("pid", 0, "with --no-provider: the provider's process ID")
	timeout := flag.Duration("timeout", 20*time.Minute, "how long provisioning may take")
	outPath := flag.String("out", filepath.Join(testenv.RepoRoot(), "out", "bench.json"), "where the JSON result goes")
	flag.Parse()
	if *clusters < 1 || *machines < 2**clusters {
		return fmt.Errorf("need at least 2 machines per cluster")
	}

	world.QuietLogs()
	ctx := context.Background()
	opts := sim.DefaultOptions()
	opts.TimeScale = 0
	fmt.Println(">> starting the world with every simulated latency at zero")
	w, err := world.Start(world.Options{WithCAPI: true, Sim: &opts})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	kubeconfig := filepath.Join(testenv.RepoRoot(), "out", "bench.kubeconfig")
	if err := w.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	res := Result{Provider: "none started (--no-provider)", Machines: *machines, Clusters: *clusters, Date: time.Now().UTC().Format(time.RFC3339)}
	if !*noProvider {
		cmd, url, err := startManager(*managerBin, kubeconfig)
		if err != nil {
			return err
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		*metricsURL, *pid, res.Provider = url, cmd.Process.Pid, *managerBin
		fmt.Printf(">> provider %s running as pid %d\n", *managerBin, *pid)
	}

	c := w.Env.Client
	start := time.Now()
	perCluster := *machines / *clusters
	total := 0
	for i := range *clusters {
		n := perCluster
		if i == *clusters-1 {
			n = *machines - perCluster*(*clusters-1)
		}
		total += n
		ns := fmt.Sprintf("bench-%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := world.ApplyClusterTemplate(ctx, c, map[string]string{
			"CLUSTER_NAME": ns, "NAMESPACE": ns, "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": fmt.Sprint(n - 1),
		}); err != nil {
			return err
		}
	}
	fmt.Printf(">> %d clusters with %d machines created\n", *clusters, total)
	provisioned, nodeRefs, err := waitFor(ctx, c, total, start, *timeout)
	if err != nil {
		return err
	}
	res.SecondsToProvisioned, res.SecondsToNodeRefs = provisioned.Seconds(), nodeRefs.Seconds()
	res.Imports, res.Clones = w.Sim.Counters.Get(sim.Imports), w.Sim.Counters.Get(sim.Clones)
	if *metricsURL != "" {
		byVerb, err := requestsByVerb(*metricsURL)
		if err != nil {
			return err
		}
		res.RequestsPerMachine = map[string]float64{}
		for verb, n := range byVerb {
			res.RequestsPerMachine[verb] = n / float64(total)
			res.RequestsTotal += n
		}
	}
	if *pid != 0 {
		cpu, peak, err := processUsage(*pid)
		if err != nil {
			return err
		}
		res.ProviderCPUSeconds, res.ProviderPeakMemoryMiB = cpu, float64(peak)/(1<<20)
	}
	printTable(res)
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*outPath, append(data, '\n'), 0o600); err != nil {
		return err
	}
	fmt.Println(">> wrote", *outPath)
	return nil
}

// startManager runs the manager binary against the world, with its
// metrics on a free local port over plain HTTP.
func startManager(bin, kubeconfig string) (*exec.Cmd, string, error) {
	metrics, health := freeAddr(), freeAddr()
	logFile, err := os.Create(filepath.Join(filepath.Dir(kubeconfig), "bench-manager.log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--enable-webhooks=false", "--insecure-diagnostics", //nolint:gosec // the benchmark's own binary
		"--diagnostics-address="+metrics, "--health-addr="+health, "--provider-namespace="+world.ProviderNamespace,
		"--isolation-ip-families=IPv4", "--v=0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting %s (make build): %w", bin, err)
	}
	return cmd, "http://" + metrics + "/metrics", nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// waitFor waits until every KubevirtMachine is provisioned and every
// Machine has a Node, and returns when each happened.
func waitFor(ctx context.Context, c client.Client, total int, start time.Time, timeout time.Duration) (provisioned, nodeRefs time.Duration, err error) {
	deadline := start.Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		kms := &infrav1.KubevirtMachineList{}
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, kms); err != nil {
			return 0, 0, err
		}
		if err := c.List(ctx, machines); err != nil {
			return 0, 0, err
		}
		ready, withNode := 0, 0
		for _, km := range kms.Items {
			if ptr.Deref(km.Status.Initialization.Provisioned, false) {
				ready++
			}
		}
		for _, m := range machines.Items {
			if m.Status.NodeRef.IsDefined() {
				withNode++
			}
		}
		if provisioned == 0 && ready == total {
			provisioned = time.Since(start)
		}
		if withNode == total && provisioned != 0 {
			return provisioned, time.Since(start), nil
		}
		if line := fmt.Sprintf("%d/%d provisioned, %d/%d with a Node", ready, total, withNode, total); line != last {
			fmt.Printf(">> %6.1fs %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("not all %d machines were ready within %s", total, timeout)
}

func printTable(r Result) {
	fmt.Printf("\n%-42s %s\n", "provider", r.Provider)
	fmt.Printf("%-42s %d in %d clusters\n", "machines", r.Machines, r.Clusters)
	fmt.Printf("%-42s %.1f\n", "seconds until all provisioned", r.SecondsToProvisioned)
	fmt.Printf("%-42s %.1f\n", "seconds until all Machines have a Node", r.SecondsToNodeRefs)
	verbs := make([]string, 0, len(r.RequestsPerMachine))
	for v := range r.RequestsPerMachine {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	for _, v := range verbs {
		fmt.Printf("%-42s %.2f\n", "provider requests per machine, "+v, r.RequestsPerMachine[v])
	}
	fmt.Printf("%-42s %.0f\n", "provider requests in total", r.RequestsTotal)
	fmt.Printf("%-42s %.1f\n", "provider CPU seconds", r.ProviderCPUSeconds)
	fmt.Printf("%-42s %.0f\n", "provider peak memory (MiB)", r.ProviderPeakMemoryMiB)
	fmt.Printf("%-42s %d imports, %d clones\n", "CDI", r.Imports, r.Clones)
}

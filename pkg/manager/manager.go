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

// Package manager wires the CAPKV controllers and webhooks into a
// controller-runtime manager. main.go, the tests and the sandbox all build the
// manager through New, so what is tested is what runs.
package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/controllers"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/failurebackoff"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/scheme"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/preflight"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/evacuation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/statuspacing"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machinepool"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/remediation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/webhooks"
)

// Options configures the manager; main.go fills it from flags.
type Options struct {
	// Namespace limits the manager to one namespace; empty watches all.
	Namespace string
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
	// SyncPeriod is how often every watched object is reconciled again.
	SyncPeriod time.Duration

	// KubevirtClusterConcurrency is the number of KubevirtClusters reconciled
	// at once.
	KubevirtClusterConcurrency int
	// KubevirtMachineConcurrency is the number of KubevirtMachines reconciled
	// at once.
	KubevirtMachineConcurrency int
	// KubevirtMachinePoolConcurrency is the number of KubevirtMachinePools
	// reconciled at once.
	KubevirtMachinePoolConcurrency int
	// KubevirtMachineTemplateConcurrency is the number of templates reconciled
	// at once.
	KubevirtMachineTemplateConcurrency int
	// KubevirtRemediationConcurrency is the number of KubevirtRemediations
	// reconciled at once; zero means 1.
	KubevirtRemediationConcurrency int

	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; empty means ProviderNamespace
	// (controller-runtime's own default reads a file only a pod has).
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables.
	HealthProbeBindAddress string
	// ProfilerAddress serves Go's pprof endpoints without authentication;
	// empty disables.
	ProfilerAddress string
	// Metrics configures the metrics (diagnostics) server.
	Metrics metricsserver.Options

	// EnableWebhooks serves the admission webhooks.
	EnableWebhooks bool
	// WebhookHost, WebhookPort and WebhookCertDir configure the webhook
	// server.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// TLSOpts apply to the webhook and metrics servers.
	TLSOpts []func(*tls.Config)

	// InfraSecretNamespaces, when set, are the only namespaces besides an
	// object's own from which infra cluster kubeconfig Secrets are read.
	InfraSecretNamespaces []string

	// IsolationDeniedCIDRs are the ranges tenant VMs may not reach, for
	// clusters that set none; empty means isolation.DefaultDeniedCIDRs.
	IsolationDeniedCIDRs []string
	// IsolationIPFamilies are the infra cluster's IP families (IPv4, IPv6);
	// empty means both.
	IsolationIPFamilies []string
	// IsolationSSHCheckCIDRs are the ranges the ssh bootstrap check's
	// connections come from when the provider does not run on the infra
	// cluster; isolation lets them reach port 22 of the VMs.
	IsolationSSHCheckCIDRs []string
	// InfraNodeLabels are infra node label keys copied to tenant Nodes,
	// besides the zone and region labels.
	InfraNodeLabels []string
	// ProviderNamespace is the namespace the manager runs in; its pods may
	// reach port 22 of tenant VMs for the ssh bootstrap check.
	ProviderNamespace string
	// PodName is the manager's own Pod in ProviderNamespace (main reads
	// POD_NAME, from the downward API), where the preflight at start
	// records its Events; empty records none.
	PodName string

	// GoldenImageRetention is how long an unused golden volume is kept.
	GoldenImageRetention time.Duration
	// LoadBalancerFallback is how long a LoadBalancer control-plane
	// Service may wait for an address before the endpoint falls back to
	// its cluster IP or a node port; 0 waits forever.
	LoadBalancerFallback time.Duration
	// NodeJoinTimeout is how long a running VM may go without a Node
	// before NodeJoined warns.
	NodeJoinTimeout time.Duration
	// GoldenImageConcurrency is the number of golden volumes reconciled at
	// once.
	GoldenImageConcurrency int
	// StatusSettleTime is how long a provisioning machine's status must
	// stay at one step before it is written; zero is the default (10s),
	// negative writes every step.
	StatusSettleTime time.Duration
	// KubeAPIQPS and KubeAPIBurst limit the manager's requests to the
	// management cluster and to each external infra cluster; zero keeps
	// the client's own limits.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// RecheckInterval is how long to wait before looking again at what no
	// event announces: the ssh bootstrap check, a clone permission, a golden
	// volume the infra cluster refused. Zero means 10s.
	RecheckInterval time.Duration
	// TenantConnectionRetryInterval is how soon the cluster cache tries
	// again to connect to a workload cluster it could not reach. Zero or
	// negative means DefaultTenantConnectionRetryInterval.
	TenantConnectionRetryInterval time.Duration

	// InProcess holds the seams for running the manager inside another
	// program; main.go leaves it zero.
	InProcess InProcess
}

// InProcess are the few things a program that embeds the manager (the test
// world, the sandbox, the benchmark) may change, and nothing else may.
type InProcess struct {
	// SharedProcess lets several managers, each with controllers of the
	// same names, run in one process.
	SharedProcess bool
	// DialGuest replaces the TCP dialer of the ssh bootstrap check, for
	// guests that are not reachable over the host's network (the
	// simulator's).
	DialGuest func(ctx context.Context, network, addr string) (net.Conn, error)
	// WrapInfraConfig adjusts the client configuration of every external
	// infra cluster, to observe the provider's requests there.
	WrapInfraConfig func(*rest.Config)
	// Now replaces the clock by which tenant credentials are renewed, so
	// that a test need not wait out four fifths of a token's lifetime (ten
	// minutes at the least).
	Now func() time.Time
}

// New builds a manager with every CAPKV controller, webhook and health check
// registered. It does not start it.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	setRateLimits(cfg, o)
	metrics.InstrumentConfig(cfg, metrics.ManagementCluster)
	s := scheme.New()
	var defaultNamespaces map[string]cache.Config
	if o.Namespace != "" {
		defaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	opts := ctrl.Options{
		Scheme:                     s,
		LeaderElection:             o.LeaderElection,
		LeaderElectionID:           o.LeaderElectionID,
		LeaderElectionNamespace:    cmp.Or(o.LeaderElectionNamespace, o.ProviderNamespace),
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		HealthProbeBindAddress:     o.HealthProbeBindAddress,
		PprofBindAddress:           o.ProfilerAddress,
		Metrics:                    o.Metrics,
		Controller: config.Controller{
			SkipNameValidation: &o.InProcess.SharedProcess,
			// controller-runtime v0.24's priority queue can deadlock on
			// shutdown (kubernetes-sigs/controller-runtime#3538, fixed by
			// #3540 in a later release): a replica stopped on SIGTERM then
			// waits out the 30 s grace period still holding the Lease, and
			// the standby takes over only after it. The chaos test caught
			// a 30 s handover so. Back to the priority queue with a
			// controller-runtime that has the fix.
			UsePriorityQueue: ptr.To(false),
		},
		Cache: cache.Options{
			DefaultNamespaces: defaultNamespaces,
			SyncPeriod:        &o.SyncPeriod,
			ByObject: map[client.Object]cache.ByObject{
				// The Secret watch needs names, owners and the owner mark.
				controllers.SecretMetadata(): {Transform: stripMetadata},
			},
		},
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets are read uncached so that the manager does not hold every
			// Secret of the management cluster in memory.
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
		}},
	}
	if o.LeaderElection {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.LeaseDuration, &o.RenewDeadline, &o.RetryPeriod
		// A replica that stops on SIGTERM (a rollout, a drain) gives up
		// the Lease, so that the standby takes over within a retry period
		// rather than a lease duration; main exits as soon as the manager
		// returns, which is what makes releasing safe
		// (docs/operations.md#replicas-and-leader-election).
		opts.LeaderElectionReleaseOnCancel = true
	}
	if o.EnableWebhooks {
		opts.WebhookServer = webhook.NewServer(webhook.Options{
			Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir, TLSOpts: o.TLSOpts,
		})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if o.EnableWebhooks {
		if err := webhooks.SetupWithManager(mgr, &tenancy.Policy{Reader: mgr.GetAPIReader(), ProviderNamespace: o.ProviderNamespace}); err != nil {
			return nil, fmt.Errorf("setting up webhooks: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
		if err := mgr.AddHealthzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
	}
	if err := setupControllers(ctx, mgr, o); err != nil {
		return nil, err
	}
	if err := addPreflight(mgr, o); err != nil {
		return nil, err
	}
	return mgr, nil
}

// addPreflight runs the preflight's read-only checks once the manager
// leads, reporting problems as Events on its Pod.
func addPreflight(mgr ctrl.Manager, o Options) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	check := &preflight.AtStart{Client: c, Discovery: disc, Recorder: mgr.GetEventRecorder("preflight")}
	if o.PodName != "" && o.ProviderNamespace != "" {
		check.Pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: o.ProviderNamespace, Name: o.PodName}}
	}
	return mgr.Add(check)
}

func setupControllers(ctx context.Context, mgr ctrl.Manager, o Options) error {
	checker, err := infracluster.NewChecker(mgr.GetAPIReader(), mgr.GetConfig())
	if err != nil {
		return err
	}
	checker.SecretNamespaces = o.InfraSecretNamespaces
	checker.Policy.ProviderNamespace = o.ProviderNamespace
	if err := controllers.IndexMachines(ctx, mgr); err != nil {
		return err
	}
	if err := controllers.IndexGoldenImages(ctx, mgr); err != nil {
		return err
	}
	clients := infracluster.NewClients(mgr, checker)
	clients.WrapConfig = func(c *rest.Config) {
		setRateLimits(c, o)
		if o.InProcess.WrapInfraConfig != nil {
			o.InProcess.WrapInfraConfig(c)
		}
	}
	if o.EnableWebhooks {
		// The extension is served on the webhook server, and asks the
		// infra clusters where a VM could migrate to.
		if err := inplace.Serve(mgr, &inplace.InfraChecks{Clients: clients}); err != nil {
			return fmt.Errorf("setting up the in-place update extension: %w", err)
		}
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     mgr.GetClient(),
		WatchFilterValue: o.WatchFilterValue,
		Client:           clustercache.ClientOptions{UserAgent: "capkv-controller-manager"},
	}, controller.Options{MaxConcurrentReconciles: o.KubevirtMachineConcurrency})
	if err != nil {
		return fmt.Errorf("setting up the tenant cluster cache: %w", err)
	}
	if err := setConnectionRetry(clusterCache, o.TenantConnectionRetryInterval); err != nil {
		return err
	}
	families, err := ipFamilies(o.IsolationIPFamilies)
	if err != nil {
		return err
	}
	for _, key := range o.InfraNodeLabels {
		if err := machine.ValidateInfraNodeLabelKey(key); err != nil {
			return fmt.Errorf("--infra-node-labels: %w", err)
		}
	}
	if _, err := isolation.ParseSSHCheckSources(o.IsolationSSHCheckCIDRs); err != nil {
		return fmt.Errorf("--isolation-ssh-check-cidrs: %w", err)
	}
	// Every controller retries a failed object within MaxFailureBackoff.
	retryCapped := failurebackoff.NewQueue[reconcile.Request](MaxFailureBackoff)
	if err := (&controllers.KubevirtClusterReconciler{
		Client: mgr.GetClient(), Clients: clients, WatchFilterValue: o.WatchFilterValue, ClusterCache: clusterCache, Now: o.InProcess.Now,
		Recorder: mgr.GetEventRecorder("kubevirtcluster-controller"), LoadBalancerFallback: o.LoadBalancerFallback,
		Isolation: isolation.Options{DeniedCIDRs: o.IsolationDeniedCIDRs, ProviderNamespace: o.ProviderNamespace,
			SSHCheckSources: o.IsolationSSHCheckCIDRs, IPFamilies: families},
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.KubevirtClusterConcurrency, NewQueue: retryCapped}); err != nil {
		return fmt.Errorf("setting up KubevirtCluster controller: %w", err)
	}
	recorder := mgr.GetEventRecorder("kubevirtmachine-controller")
	pacing := &statuspacing.Keeper{SettleTime: o.StatusSettleTime}
	pacing.ReportStageAges()
	machines := &machine.Service{
		Client: mgr.GetClient(), Recorder: recorder, ClusterCache: clusterCache,
		Evacuation: &evacuation.Evacuator{Client: mgr.GetClient(), Recorder: recorder, ClusterCache: clusterCache},
		SSH:        &sshcheck.Prober{Dial: o.InProcess.DialGuest}, RecheckAfter: o.RecheckInterval,
		InfraNodeLabels: machine.InfraNodeLabelKeys(o.InfraNodeLabels), NodeJoinTimeout: o.NodeJoinTimeout,
		Status: pacing,
	}
	if err := (&controllers.KubevirtMachineReconciler{
		Client: mgr.GetClient(), Clients: clients, WatchFilterValue: o.WatchFilterValue,
		Recorder: recorder, ClusterCache: clusterCache, Machines: machines, StatusPacing: pacing,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.KubevirtMachineConcurrency, NewQueue: retryCapped}); err != nil {
		return fmt.Errorf("setting up KubevirtMachine controller: %w", err)
	}
	if err := (&controllers.KubevirtMachinePoolReconciler{
		Client: mgr.GetClient(), Clients: clients, WatchFilterValue: o.WatchFilterValue,
		Recorder: mgr.GetEventRecorder("kubevirtmachinepool-controller"),
		Pools: &machinepool.Service{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kubevirtmachinepool-controller"),
			RecheckAfter: o.RecheckInterval},
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: max(o.KubevirtMachinePoolConcurrency, 1), NewQueue: retryCapped}); err != nil {
		return fmt.Errorf("setting up KubevirtMachinePool controller: %w", err)
	}
	if err := (&controllers.KubevirtMachineTemplateReconciler{
		Client: mgr.GetClient(), Clients: clients, WatchFilterValue: o.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.KubevirtMachineTemplateConcurrency, NewQueue: retryCapped}); err != nil {
		return fmt.Errorf("setting up KubevirtMachineTemplate controller: %w", err)
	}
	if err := (&controllers.KubevirtRemediationReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: o.WatchFilterValue,
		Remediations: &remediation.Service{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("kubevirtremediation-controller")},
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: max(o.KubevirtRemediationConcurrency, 1), NewQueue: retryCapped}); err != nil {
		return fmt.Errorf("setting up KubevirtRemediation controller: %w", err)
	}
	retention := o.GoldenImageRetention
	if retention <= 0 {
		retention = time.Hour
	}
	if err := (&controllers.GoldenImageReconciler{
		Client: mgr.GetClient(), Clients: clients,
		Collector: &goldenkeeper.Collector{Retention: retention, Imports: goldenkeeper.NewImports(time.Now())},
	}).SetupWithManager(ctx, mgr, controller.TypedOptions[controllers.GoldenRequest]{MaxConcurrentReconciles: max(o.GoldenImageConcurrency, 1),
		NewQueue: failurebackoff.NewQueue[controllers.GoldenRequest](MaxFailureBackoff)}); err != nil {
		return fmt.Errorf("setting up golden image controller: %w", err)
	}
	return nil
}

// MaxFailureBackoff is the longest any of the provider's controllers
// waits before it tries an object again after a failed reconcile (an infra
// API server or webhook that errs): Cluster API's and controller-runtime's
// limiters grow to about 17 minutes, far longer than the outages a
// platform team sees recover (docs/operations.md#outages). The cap is in
// each controller's queue (package failurebackoff).
const MaxFailureBackoff = 2 * time.Minute

// stripMetadata drops what the Secret metadata watch does not need: every
// annotation but the provider's owner mark (kubectl apply can leave a
// Secret's whole content in one) and the managed fields.
func stripMetadata(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		var kept map[string]string
		if owner, ok := m.GetAnnotations()[infrav1.OwnerAnnotation]; ok {
			kept = map[string]string{infrav1.OwnerAnnotation: owner}
		}
		m.SetAnnotations(kept)
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func ipFamilies(names []string) ([]corev1.IPFamily, error) {
	var out []corev1.IPFamily
	for _, n := range names {
		f := corev1.IPFamily(n)
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			return nil, fmt.Errorf("--isolation-ip-families: %q is neither IPv4 nor IPv6", n)
		}
		out = append(out, f)
	}
	return out, nil
}

// setRateLimits applies the client rate limits of o to cfg. The client's
// defaults (5 requests a second, bursts of 10, or controller-runtime's 20
// and 30) queue a provider reconciling hundreds of machines behind its own
// limiter; Cluster API's managers default to 100 and 200 for that reason.
func setRateLimits(cfg *rest.Config, o Options) {
	if o.KubeAPIQPS > 0 {
		cfg.QPS = o.KubeAPIQPS
	}
	if o.KubeAPIBurst > 0 {
		cfg.Burst = o.KubeAPIBurst
	}
}

// DefaultTenantConnectionRetryInterval is how soon, by default, the cluster
// cache connects again to a workload cluster that refused it.
const DefaultTenantConnectionRetryInterval = 5 * time.Second

// setConnectionRetry sets how soon the cluster cache retries a workload
// cluster it could not connect to (refused, timed out, no kubeconfig
// Secret yet) or dropped after failed health probes. A new cluster's API
// server answers only once its first control-plane VM has booted, so the
// first attempts fail; with Cluster API's 30 s the provider then learns of
// the cluster's Nodes (their providerIDs, the machines' readiness) up to
// 30 s late on every new cluster. A failed attempt costs a read of the
// kubeconfig Secret, a dial and an error log line, and holds one of the
// cache's workers (--kubevirtmachine-concurrency) for at most its probe
// timeout. Cluster API marks the setter as meant for tests; the type
// assertion fails the start, so a Cluster API upgrade that drops it is
// noticed at once.
func setConnectionRetry(cc clustercache.ClusterCache, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultTenantConnectionRetryInterval
	}
	setter, ok := cc.(interface{ SetConnectionCreationRetryInterval(time.Duration) })
	if !ok {
		return fmt.Errorf("the cluster cache (%T) cannot set its connection retry interval", cc)
	}
	setter.SetConnectionCreationRetryInterval(interval)
	return nil
}

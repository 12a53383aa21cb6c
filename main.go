// Command manager runs the CAPKV controllers and webhooks.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // enables --logging-format=json
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/version"
)

func main() {
	var (
		o              manager.Options
		managerOptions flags.ManagerOptions
		logOptions     = logs.NewOptions()
		printVersion   bool
	)
	fs := pflag.CommandLine
	logsv1.AddFlags(logOptions, fs)
	fs.StringVar(&o.Namespace, "namespace", "", "Namespace to watch; empty watches every namespace.")
	fs.StringVar(&o.WatchFilterValue, "watch-filter", "",
		"Only reconcile objects labelled cluster.x-k8s.io/watch-filter with this value; empty reconciles all.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "How often every watched object is reconciled again.")
	fs.IntVar(&o.KubevirtClusterConcurrency, "kubevirtcluster-concurrency", 10, "KubevirtClusters reconciled at once.")
	fs.IntVar(&o.KubevirtMachineConcurrency, "kubevirtmachine-concurrency", 10, "KubevirtMachines reconciled at once.")
	fs.IntVar(&o.KubevirtMachineTemplateConcurrency, "kubevirtmachinetemplate-concurrency", 2, "KubevirtMachineTemplates reconciled at once.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionID, "leader-elect-id", "controller-leader-election-capkv", "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "Leader election lease duration.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "Leader election renew deadline.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "Leader election retry period.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-addr", ":9440", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", true, "Serve the admission webhooks (needs certificates in --webhook-cert-dir).")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/", "Directory with tls.crt and tls.key for the webhook server.")
	fs.BoolVar(&printVersion, "version", false, "Print the version and exit.")
	flags.AddManagerOptions(fs, &managerOptions)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()

	if printVersion {
		fmt.Println(version.String())
		return
	}
	if err := logsv1.ValidateAndApply(logOptions, nil); err != nil {
		fmt.Fprintf(os.Stderr, "invalid logging flags: %v\n", err)
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")

	tlsOpts, metricsOpts, err := flags.GetManagerOptions(managerOptions)
	if err != nil {
		log.Error(err, "invalid TLS or diagnostics flags")
		os.Exit(1)
	}
	o.TLSOpts, o.Metrics = tlsOpts, *metricsOpts

	ctx := ctrl.SetupSignalHandler()
	mgr, err := manager.New(ctx, ctrl.GetConfigOrDie(), o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting manager", "version", version.String())
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

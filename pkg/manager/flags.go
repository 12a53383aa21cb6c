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

package manager

import (
	"os"
	"time"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/statuspacing"

	"github.com/spf13/pflag"
)

// DefaultLeaderElectionID names the leader election Lease unless
// --leader-elect-id says otherwise.
const DefaultLeaderElectionID = "controller-leader-election-capkv"

// AddFlags binds the manager's command-line flags to o.
func AddFlags(fs *pflag.FlagSet, o *Options) {
	fs.StringVar(&o.Namespace, "namespace", "", "Namespace to watch; empty watches every namespace.")
	fs.StringSliceVar(&o.InfraSecretNamespaces, "infra-secret-namespaces", nil,
		"Namespaces, besides an object's own, from which kubeconfig Secrets may be read at all; empty leaves it to KubevirtClusterIdentities, which grant each Secret of another namespace (docs/multi-tenancy.md).")
	fs.StringSliceVar(&o.IsolationDeniedCIDRs, "isolation-denied-cidrs", isolation.DefaultDeniedCIDRs,
		"Address ranges tenant VMs may not reach (the infra cluster's pod, service and node ranges), for clusters that set no isolation.deniedCIDRs.")
	fs.StringSliceVar(&o.IsolationIPFamilies, "isolation-ip-families", []string{"IPv4", "IPv6"},
		"IP families of the infra cluster; isolation opens internet egress for each.")
	fs.StringSliceVar(&o.IsolationSSHCheckCIDRs, "isolation-ssh-check-cidrs", nil,
		"Address ranges the ssh bootstrap check's connections come from when the manager does not run on the infra cluster (an external infra cluster: the management cluster's node or gateway addresses); isolation lets them reach port 22 of tenant VMs.")
	fs.StringSliceVar(&o.InfraNodeLabels, "infra-node-labels", nil,
		"Infra node label keys copied to the tenant Node of every VM placed there, besides topology.kubernetes.io/zone and region.")
	fs.StringVar(&o.ProviderNamespace, "provider-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace the manager runs in; isolation lets its pods reach port 22 of tenant VMs for the ssh bootstrap check. Defaults to $POD_NAMESPACE.")
	fs.DurationVar(&o.GoldenImageRetention, "golden-image-retention", time.Hour,
		"How long a golden image volume is kept after the last machine or template using it is gone.")
	fs.DurationVar(&o.NodeJoinTimeout, "node-join-timeout", 10*time.Minute,
		"How long a running VM may go without its Node joining the workload cluster before its NodeJoined condition warns that the image may lack kubeadm.")
	fs.DurationVar(&o.LoadBalancerFallback, "load-balancer-fallback-after", 2*time.Minute,
		"How long a LoadBalancer control-plane Service may wait for an address before the endpoint falls back to its cluster IP (the local infra cluster) or a node port (external ones); 0 waits forever.")
	fs.IntVar(&o.GoldenImageConcurrency, "goldenimage-concurrency", 2, "Golden image volumes reconciled at once.")
	fs.DurationVar(&o.StatusSettleTime, "status-settle-time", statuspacing.DefaultStatusSettleTime,
		"How long a provisioning machine must stay at one step before its status is written; failures, provisioning and later changes are written at once. Negative writes every step.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 100, "Requests per second the manager may send to the management cluster and to each external infra cluster.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 200, "Requests the manager may send at once above --kube-api-qps, per cluster.")
	fs.DurationVar(&o.RecheckInterval, "recheck-interval", 10*time.Second,
		"How long to wait before looking again at what no event announces: the ssh bootstrap check, a clone permission, a golden volume the infra cluster refused.")
	fs.DurationVar(&o.TenantConnectionRetryInterval, "tenant-connection-retry-interval", DefaultTenantConnectionRetryInterval,
		"How soon to connect again to a workload cluster that could not be reached (a new cluster's API server refuses until its first control-plane VM boots) or was dropped after failed health probes. Cluster API's own default is 30s.")
	fs.StringVar(&o.WatchFilterValue, "watch-filter", "",
		"Only reconcile objects labelled cluster.x-k8s.io/watch-filter with this value; empty reconciles all.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "How often every watched object is reconciled again.")
	fs.IntVar(&o.KubevirtClusterConcurrency, "kubevirtcluster-concurrency", 10, "KubevirtClusters reconciled at once.")
	fs.IntVar(&o.KubevirtMachineConcurrency, "kubevirtmachine-concurrency", 10, "KubevirtMachines reconciled at once.")
	fs.IntVar(&o.KubevirtMachineTemplateConcurrency, "kubevirtmachinetemplate-concurrency", 2, "KubevirtMachineTemplates reconciled at once.")
	fs.IntVar(&o.KubevirtMachinePoolConcurrency, "kubevirtmachinepool-concurrency", 2, "KubevirtMachinePools reconciled at once.")
	fs.IntVar(&o.KubevirtRemediationConcurrency, "kubevirtremediation-concurrency", 2, "KubevirtRemediations reconciled at once.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionID, "leader-elect-id", DefaultLeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-elect-namespace", "", "Namespace of the leader election Lease; empty uses --provider-namespace.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "Leader election lease duration.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "Leader election renew deadline.")
	// client-go waits a retry period plus up to 120% of it between a
	// standby's attempts, so 800ms hands a released Lease over within
	// 1.76 s; the leader renews as often.
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 800*time.Millisecond, "Leader election retry period: how often the standby tries for the Lease and the leader renews it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-addr", ":9440", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.ProfilerAddress, "profiler-address", "",
		"Address of an unauthenticated pprof endpoint (e.g. localhost:6060) for profiling; empty disables. The secure --diagnostics-address serves pprof too, to authorized users.")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", true, "Serve the admission webhooks (needs tls.crt and tls.key in --webhook-cert-dir).")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the webhook server binds; empty binds every interface.")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/", "Directory with tls.crt and tls.key for the webhook server.")
}

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
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestAddFlags(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	AddFlags(fs, &o)
	err := fs.Parse([]string{
		"--namespace=tenants", "--watch-filter=blue", "--sync-period=3m",
		"--kubevirtmachine-concurrency=25", "--kubevirtcluster-concurrency=4", "--kubevirtmachinetemplate-concurrency=3", "--kubevirtremediation-concurrency=5",
		"--leader-elect", "--leader-elect-id=capkv-test", "--health-addr=:19440",
		"--enable-webhooks=false", "--webhook-port=19443", "--webhook-cert-dir=/certs",
		"--tenant-connection-retry-interval=2s",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Namespace: "tenants", WatchFilterValue: "blue", SyncPeriod: 3 * time.Minute,
		KubevirtMachineConcurrency: 25, KubevirtClusterConcurrency: 4, KubevirtMachineTemplateConcurrency: 3, KubevirtRemediationConcurrency: 5,
		LeaderElection: true, LeaderElectionID: "capkv-test", HealthProbeBindAddress: ":19440",
		EnableWebhooks: false, WebhookPort: 19443, WebhookCertDir: "/certs",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 800 * time.Millisecond,
	}
	if o.Namespace != want.Namespace || o.WatchFilterValue != want.WatchFilterValue || o.SyncPeriod != want.SyncPeriod ||
		o.KubevirtMachineConcurrency != want.KubevirtMachineConcurrency || o.KubevirtClusterConcurrency != want.KubevirtClusterConcurrency ||
		o.KubevirtMachineTemplateConcurrency != want.KubevirtMachineTemplateConcurrency ||
		o.KubevirtRemediationConcurrency != want.KubevirtRemediationConcurrency || o.LeaderElection != want.LeaderElection ||
		o.LeaderElectionID != want.LeaderElectionID || o.HealthProbeBindAddress != want.HealthProbeBindAddress ||
		o.EnableWebhooks != want.EnableWebhooks || o.WebhookPort != want.WebhookPort || o.WebhookCertDir != want.WebhookCertDir ||
		o.LeaseDuration != want.LeaseDuration || o.RenewDeadline != want.RenewDeadline || o.RetryPeriod != want.RetryPeriod ||
		o.TenantConnectionRetryInterval != 2*time.Second {
		t.Errorf("parsed %+v\nwant   %+v", o, want)
	}
}

func TestScaleFlagDefaults(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	AddFlags(fs, &o)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.KubeAPIQPS != 100 || o.KubeAPIBurst != 200 || o.StatusSettleTime != 2*time.Minute {
		t.Errorf("defaults: qps %v, burst %d, status settle time %s; want 100, 200, 2m", o.KubeAPIQPS, o.KubeAPIBurst, o.StatusSettleTime)
	}
	if err := fs.Parse([]string{"--kube-api-qps=50", "--kube-api-burst=80", "--status-settle-time=-1s"}); err != nil {
		t.Fatal(err)
	}
	if o.KubeAPIQPS != 50 || o.KubeAPIBurst != 80 || o.StatusSettleTime != -time.Second {
		t.Errorf("parsed: qps %v, burst %d, status settle time %s", o.KubeAPIQPS, o.KubeAPIBurst, o.StatusSettleTime)
	}
}

// TestEveryFlagIsDocumented keeps docs/configuration.md in step with the
// manager's own flags: each one must have a row there.
func TestEveryFlagIsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	AddFlags(fs, &Options{})
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		if !strings.Contains(string(page), "`--"+f.Name+"`") {
			t.Errorf("flag --%s has no row in docs/configuration.md", f.Name)
		}
	})
	if n < 20 {
		t.Fatalf("only %d flags visited", n)
	}
}

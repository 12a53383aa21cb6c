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

// Package e2e holds the end-to-end specs: the full Cluster API flow with
// this provider, run in `make test` against the sandbox's world (real API
// server, scheduler and garbage collector, the real Cluster API controllers,
// the real KubeVirt and CDI control planes with their node parts
// simulated), or unchanged against a real management
// cluster with KubeVirt and CDI when E2E_KUBECONFIG names its kubeconfig
// (the provider must then be installed there).
package e2e

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var (
	// c reaches the management cluster.
	c client.Client
	// setup is the sandbox's world with the provider clusterctl installed;
	// nil against a real cluster.
	setup *suite.Setup
	// w is the sandbox's world; nil against a real cluster.
	w *world.World
	// cc is the real clusterctl, configured with a local repository of
	// this build's release artifacts.
	cc *clusterctl.Clusterctl
	// mgmt is the world's management cluster, as clusterctl reaches it.
	mgmt clusterctl.Management
	// provider runs the pods of the provider's Deployment that clusterctl
	// init installed.
	provider *world.PodRunner
	// initOutput is what clusterctl init printed.
	initOutput string
	// timeout bounds every wait; real clusters boot real VMs.
	timeout = 5 * time.Minute
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if !shardConfig(&suiteConfig) {
		runShards(t)
		return
	}
	RunSpecs(t, "CAPKV end to end", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func() {
	defer func() {
		if d, err := time.ParseDuration(os.Getenv("E2E_TIMEOUT")); err == nil {
			timeout = d
		}
	}()
	if path := os.Getenv("E2E_KUBECONFIG"); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		Expect(err).NotTo(HaveOccurred())
		c, err = client.New(cfg, client.Options{Scheme: testenv.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		timeout = 30 * time.Minute
		return
	}
	var err error
	By("starting the world: API server, KubeVirt, CDI, Cluster API, cert-manager")
	setup, err = suite.Start(suite.Options{})
	Expect(err).NotTo(HaveOccurred())
	w, cc, mgmt = setup.World, setup.Clusterctl, setup.Managements[0]
	c = w.Env.Client
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	By("clusterctl init --infrastructure kubevirt")
	outputs, err := setup.Init(ctx, suite.ReleaseVersion)
	Expect(err).NotTo(HaveOccurred())
	initOutput, provider = outputs[0], setup.Providers[0]
	// Every spec calls the provider's webhooks; they answer once
	// cert-manager injected their CA.
	By("waiting for cert-manager to inject the webhooks' CA")
	Eventually(servingCertInjected(ctx)).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
})

var _ = AfterSuite(func() {
	By("waiting for the clusters the specs left to the reaper")
	reapedErr := waitReaped()
	Expect(errors.Join(reapedErr, setup.Stop())).To(Succeed())
})

// A failed spec's report ends with each provider pod's restart count, its
// container's state and the tail of its log: a provider that lost its lease
// and restarted under load explains a webhook call refused mid-spec; then
// the world's components that exited (a virt-controller gone for its
// back-off explains a VM that got no instance).
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() || provider == nil {
		return
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: clusterctl.Namespace, Name: manager.DefaultLeaderElectionID}, lease); err != nil {
		GinkgoWriter.Printf("provider lease: %v\n", err)
	} else {
		GinkgoWriter.Printf("provider lease %s: holder %s, renewed %v, transitions %d\n", lease.Name,
			ptr.Deref(lease.Spec.HolderIdentity, ""), lease.Spec.RenewTime, ptr.Deref(lease.Spec.LeaseTransitions, 0))
	}
	GinkgoWriter.Printf("provider pods (restarts, state, last 30 log lines of each):\n%s\n", provider.LogTails(30))
	if w != nil {
		GinkgoWriter.Printf("world components that exited and were started again: %q\n", w.ComponentExits())
	}
})

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

// Package move holds the clusterctl move specs: two management clusters
// (two API servers, each with the real Cluster API controllers,
// cert-manager and this provider installed by clusterctl init) sharing one
// external infra cluster, where KubeVirt and CDI run.
package move

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var (
	w *world.World
	// from and to are the two management clusters; tenants move from the
	// first to the second.
	from, to clusterctl.Management
	// providers run the provider's pods on each.
	providers []*world.PodRunner
	cc        *clusterctl.Clusterctl
	timeout   = 5 * time.Minute
)

// releaseVersion is the version of this build's artifacts in the local
// repository.
const releaseVersion = "v0.2.0"

func TestMove(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CAPKV clusterctl move")
}

var _ = BeforeSuite(func() {
	world.QuietLogs()
	var err error
	w, err = world.Start(world.Options{WithCAPI: true, ExternalInfra: true, WithoutProviderCRDs: true, WithCertManager: true})
	Expect(err).NotTo(HaveOccurred())
	second, err := w.StartManagement()
	Expect(err).NotTo(HaveOccurred())
	cc, err = clusterctl.NewForWorld(releaseVersion)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i, env := range []*testenv.Env{w.Env, second.Env} {
		m, err := cc.ManagementOf(env, []string{"from", "to"}[i])
		Expect(err).NotTo(HaveOccurred())
		_, runner, err := cc.Init(ctx, m, releaseVersion)
		Expect(err).NotTo(HaveOccurred())
		providers = append(providers, runner)
		if i == 0 {
			from = m
		} else {
			to = m
		}
	}
})

var _ = AfterSuite(func() {
	for _, p := range providers {
		Expect(p.Stop()).To(Succeed())
	}
	if w != nil {
		Expect(w.Stop()).To(Succeed())
	}
	if cc != nil {
		Expect(cc.Cleanup()).To(Succeed())
	}
})

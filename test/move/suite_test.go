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
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var (
	setup *suite.Setup
	w     *world.World
	// from and to are the two management clusters; tenants move from the
	// first to the second.
	from, to clusterctl.Management
	cc       *clusterctl.Clusterctl
	timeout  = 5 * time.Minute
	// movedNS and pooledNS hold the clusters of the two specs.
	movedNS, pooledNS string
)

func TestMove(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CAPKV clusterctl move")
}

var _ = BeforeSuite(func() {
	var err error
	setup, err = suite.Start(suite.Options{World: world.Options{ExternalInfra: true}, Managements: []string{"from", "to"}})
	Expect(err).NotTo(HaveOccurred())
	w, cc, from, to = setup.World, setup.Clusterctl, setup.Managements[0], setup.Managements[1]
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The provider runs on both, each with its own pods.
	_, err = setup.Init(ctx, suite.ReleaseVersion)
	Expect(err).NotTo(HaveOccurred())
	// Both specs' clusters come up side by side: each spec moves only its
	// own namespace, and bringing them up one after the other cost a
	// cluster's start.
	movedNS, pooledNS = applyMovedCluster(ctx), applyPooledCluster(ctx)
})

var _ = AfterSuite(func() {
	Expect(setup.Stop()).To(Succeed())
})

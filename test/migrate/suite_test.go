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

// Package migrate holds the spec of the switch from the community KubeVirt
// provider (docs/migrating-from-capk.md): a management cluster with that
// provider's release installed by clusterctl init and a running cluster as
// it leaves one; clusterctl delete and init replace it with this provider,
// which adopts the cluster in place and runs it from then on.
package migrate

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
	setup   *suite.Setup
	w       *world.World
	cc      *clusterctl.Clusterctl
	mgmt    clusterctl.Management
	timeout = 5 * time.Minute
)

func TestMigrate(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CAPKV switch from the community provider")
}

var _ = BeforeSuite(func() {
	var err error
	setup, err = suite.Start(suite.Options{})
	Expect(err).NotTo(HaveOccurred())
	w, cc, mgmt = setup.World, setup.Clusterctl, setup.Managements[0]
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	Expect(cc.AddCommunityRelease()).To(Succeed())
	_, err = cc.InitCommunity(ctx, mgmt)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	Expect(setup.Stop()).To(Succeed())
})

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

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	capiclusterctl "sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Cluster API's own end-to-end specs (sigs.k8s.io/cluster-api/test/e2e),
// run unchanged against this provider: the specs its maintainers use to
// check an infrastructure provider against the contract. They reach the
// world's management cluster through a framework.ClusterProxy and render
// their clusters with clusterctl's library from the same local repository
// as the real clusterctl (clusterctl init already ran in BeforeSuite).

// capiHarness is what every Cluster API spec takes: built once per
// process, the first time a spec asks.
type capiHarness struct {
	proxy     framework.ClusterProxy
	config    *capiclusterctl.E2EConfig
	artifacts string
}

var (
	capiOnce sync.Once
	capi     capiHarness
)

// capiSpecs returns the harness, or skips the spec against a real cluster:
// the specs render from the sandbox's clusterctl repository.
func capiSpecs() capiHarness {
	if w == nil {
		Skip("Cluster API's specs render from the sandbox world's clusterctl repository")
	}
	capiOnce.Do(func() {
		artifacts := filepath.Join(testenv.RepoRoot(), "out", "test-logs", "capi-e2e"+os.Getenv(shardEnv))
		Expect(os.RemoveAll(artifacts)).To(Succeed())
		capi = capiHarness{
			proxy:     framework.NewClusterProxy("management", mgmt.Kubeconfig, testenv.NewScheme()),
			config:    capiConfig(),
			artifacts: artifacts,
		}
	})
	return capi
}

// capiKubernetesVersion is the version the specs' clusters run: the
// flavors' default, whose image the world's registry holds.
const capiKubernetesVersion = "v1.34.1"

// capiConfig is the specs' e2e configuration, written here instead of in a
// YAML file: clusterctl init ran already, so it names no providers to
// install, only the variables and the intervals. A wait the specs ask for
// and the map lacks falls back to Gomega's one second, so every key any
// spec in the package reads is here. The world provisions a machine in a
// few seconds; the waits are the suite's own timeout, polled each second.
func capiConfig() *capiclusterctl.E2EConfig {
	wait := []string{timeout.String(), "1s"}
	intervals := map[string][]string{}
	for _, key := range []string{
		"check-machines-stable", "wait-autoscaler", "wait-cluster", "wait-control-plane",
		"wait-control-plane-upgrade", "wait-controllers", "wait-delete-cluster",
		"wait-deployment-available", "wait-machine-deleted", "wait-machine-deployment-upgrade",
		"wait-machine-pool-nodes", "wait-machine-pool-upgrade", "wait-machine-provisioned",
		"wait-machine-remediation", "wait-machine-upgrade", "wait-machines", "wait-nodes-ready",
		"wait-resource-versions-become-stable", "wait-resource-versions-remain-stable", "wait-worker-nodes",
	} {
		intervals["default/"+key] = wait
	}
	return &capiclusterctl.E2EConfig{
		ManagementClusterName: "management",
		Variables: map[string]string{
			capie2e.KubernetesVersion: capiKubernetesVersion,
		},
		Intervals: intervals,
	}
}

var _ = Describe("Cluster API's quick start", func() {
	ctx := context.Background()
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		h := capiSpecs()
		return capie2e.QuickStartSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, ns, name string) {
				validateOwnership(ctx, proxy, ns, name, false)
			},
		}
	})
})

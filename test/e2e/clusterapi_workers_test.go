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

	. "github.com/onsi/ginkgo/v2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
)

// Cluster API's specs of workers (clusterapi_test.go has the harness):
// they run in the e2e suite's second shard, the others in its first.

var _ = Describe("Cluster API's MachineDeployment scale", func() {
	ctx := context.Background()
	capie2e.MachineDeploymentScaleSpec(ctx, func() capie2e.MachineDeploymentScaleSpecInput {
		h := capiSpecs()
		return capie2e.MachineDeploymentScaleSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(nil),
		}
	})
})

// In-place changes to a control plane's and a MachineDeployment's machine
// fields (labels, annotations, timeouts) and taints, propagated to the
// Machines and their Nodes without replacing a machine. The kcp-md-taints
// test flavor (testdata/flavors) starts the machines with the spec's two
// taints.
var _ = Describe("Cluster API's KubeadmControlPlane and MachineDeployment rollout", func() {
	ctx := context.Background()
	capie2e.KCPAndMachineDeploymentRolloutSpec(ctx, func() capie2e.KCPAndMachineDeploymentRolloutSpecInput {
		h := capiSpecs()
		return capie2e.KCPAndMachineDeploymentRolloutSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			Flavor:                "kcp-md-taints",
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(nil),
		}
	})
})

// A worker whose Node reports the md-remediation test flavor's condition
// False is replaced by its MachineDeployment, through the flavor's
// MachineHealthCheck. The spec writes the condition with a merge patch of
// the Node's status subresource, which the world serves
// (test/world/nodestatus.go).
var _ = Describe("Cluster API's MachineDeployment remediation", func() {
	ctx := context.Background()
	capie2e.MachineDeploymentRemediationSpec(ctx, func() capie2e.MachineDeploymentRemediationSpecInput {
		h := capiSpecs()
		return capie2e.MachineDeploymentRemediationSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(nil),
		}
	})
})

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
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	capiclusterctl "sigs.k8s.io/cluster-api/test/framework/clusterctl"
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
		}
	})
})

// QuickStartSpec waits for no MachinePool (it passes no interval for
// them), so the resilience checks of a MachinePool's cluster run here, with
// the framework's own steps around them.
var _ = Describe("Cluster API's resilience checks on a MachinePool cluster", func() {
	ctx := context.Background()
	const specName = "machine-pool-resilience"
	var (
		h             capiHarness
		namespace     *corev1.Namespace
		cancelWatches context.CancelFunc
		result        *capiclusterctl.ApplyClusterTemplateAndWaitResult
	)
	BeforeEach(func() {
		h = capiSpecs()
		namespace, cancelWatches = framework.SetupSpecNamespace(ctx, specName, h.proxy, h.artifacts, nil)
		result = new(capiclusterctl.ApplyClusterTemplateAndWaitResult)
	})
	It("rebuilds the owner references and finalizers of a cluster with a MachinePool", func() {
		name := "mp-resilience"
		capiclusterctl.ApplyClusterTemplateAndWait(ctx, capiclusterctl.ApplyClusterTemplateAndWaitInput{
			ClusterProxy: h.proxy,
			ConfigCluster: capiclusterctl.ConfigClusterInput{
				LogFolder:                filepath.Join(h.artifacts, "clusters", h.proxy.GetName()),
				ClusterctlConfigPath:     cc.Config,
				KubeconfigPath:           h.proxy.GetKubeconfigPath(),
				InfrastructureProvider:   capiclusterctl.DefaultInfrastructureProvider,
				Flavor:                   "machinepool",
				Namespace:                namespace.Name,
				ClusterName:              name,
				KubernetesVersion:        capiKubernetesVersion,
				ControlPlaneMachineCount: ptr.To[int64](1),
				WorkerMachineCount:       ptr.To[int64](1),
			},
			WaitForClusterIntervals:      h.config.GetIntervals(specName, "wait-cluster"),
			WaitForControlPlaneIntervals: h.config.GetIntervals(specName, "wait-control-plane"),
			WaitForMachineDeployments:    h.config.GetIntervals(specName, "wait-worker-nodes"),
			WaitForMachinePools:          h.config.GetIntervals(specName, "wait-machine-pool-nodes"),
			PostMachinesProvisioned: func() {
				validateOwnership(ctx, h.proxy, namespace.Name, name, false)
			},
		}, result)
	})
	AfterEach(func() {
		framework.DumpSpecResourcesAndCleanup(ctx, specName, h.proxy, cc.Config, h.artifacts, namespace, cancelWatches,
			result.Cluster, h.config.GetIntervals, false)
	})
})

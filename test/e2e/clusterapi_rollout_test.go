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
	"strings"

	. "github.com/onsi/ginkgo/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
)

// Cluster API's ClusterClass rollout spec (clusterapi_test.go has the
// harness). It runs in the e2e suite's first shard.

// ClusterClass rollouts: in-place changes through the Cluster's topology
// (labels, annotations, timeouts, taints) reach the control plane, the
// MachineDeployment, their Machines and Nodes without a replacement, then
// template changes roll the machines; every object's metadata is checked
// against the class's rules along the way. The topology-taints test
// flavor starts the machines with the spec's two taints.
var _ = Describe("Cluster API's ClusterClass rollout", func() {
	ctx := context.Background()
	capie2e.ClusterClassRolloutSpec(ctx, func() capie2e.ClusterClassRolloutSpecInput {
		h := capiSpecs()
		return capie2e.ClusterClassRolloutSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			Flavor:                "topology-taints",
			// The metadata the provider adds is its own, not the class's.
			FilterMetadataBeforeValidation: withoutProviderMetadata,
			SkipCleanup:                    true,
			PostNamespaceCreated:           cleanUpLater(nil),
		}
	})
})

// withoutProviderMetadata is an object's labels and annotations without
// those the provider sets itself (capkv.io/..., and clusterctl's
// block-move on a KubevirtCluster whose infra cluster is the management
// cluster), which no ClusterClass rule propagates.
func withoutProviderMetadata(obj client.Object) clusterv1.ObjectMeta {
	keep := func(in map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range in {
			if !strings.HasPrefix(k, "capkv.io/") && k != movable.BlockAnnotation {
				out[k] = v
			}
		}
		return out
	}
	return clusterv1.ObjectMeta{Labels: keep(obj.GetLabels()), Annotations: keep(obj.GetAnnotations())}
}

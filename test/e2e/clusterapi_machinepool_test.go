//go:build e2e

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
	"k8s.io/utils/ptr"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
)

// Cluster API builds MachinePoolSpec only with its e2e build tag
// (machine_pool.go), so this file carries it too: make test builds the
// test module with -tags e2e (hack/test-module.sh).
var _ = Describe("Cluster API's MachinePool", func() {
	ctx := context.Background()
	capie2e.MachinePoolSpec(ctx, func() capie2e.MachinePoolInput {
		h := capiSpecs()
		return capie2e.MachinePoolInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			Flavor:                ptr.To("machinepool"),
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(nil),
		}
	})
})

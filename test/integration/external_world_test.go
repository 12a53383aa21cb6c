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

package integration

import (
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// external is the world whose KubeVirt runs on a second API server, shared
// by the tests that need one (TestExternalInfraCluster, then
// TestInfraClusterOutage, declared one after the other so that they run
// so): a world start is the dearest part of either, about 50 CPU seconds
// of its two API servers and their components. Each test runs its own
// provider against it and uses its own namespaces on both clusters; the
// outage test cuts only its own proxy to the infra API server, never the
// server itself. The outage test, the last to use it, stops it (an idle
// world still costs CPU), and TestMain stops it if a run ended before.
var external struct {
	mu sync.Mutex
	w  *world.World
}

// externalWorld returns the shared external-infra world, started if it
// does not run.
func externalWorld(t *testing.T) *world.World {
	t.Helper()
	external.mu.Lock()
	defer external.mu.Unlock()
	if external.w == nil {
		ext, err := world.Start(world.Options{ExternalInfra: true})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		external.w = ext
	}
	return external.w
}

// stopExternalWorld stops the shared external-infra world, if a test
// started it and it still runs.
func stopExternalWorld() error {
	external.mu.Lock()
	defer external.mu.Unlock()
	if external.w == nil {
		return nil
	}
	ext := external.w
	external.w = nil
	return ext.Stop()
}

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

// Package integration tests the provider's controllers end to end on the
// test world: a real API server, scheduler and controller-manager, the
// real KubeVirt and CDI control planes with their node parts simulated,
// and the provider's manager built as main.go builds it.
package integration

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// w is the world shared by the tests of this package: the management
// cluster is also the infra cluster.
var (
	w      *world.World
	writes = &writeCounter{}
	// stopProvider stops the package's provider.
	stopProvider func()
)

// withoutSharedProvider stops the package's provider until the test ends,
// then starts it again: a test that runs its own replicas of the provider
// in the shared world, instead of starting a world of its own (about 30
// CPU seconds).
func withoutSharedProvider(t *testing.T) {
	t.Helper()
	stopProvider()
	stopProvider = func() {}
	t.Cleanup(func() {
		stop, err := startProvider(w, writes)
		if err != nil {
			t.Errorf("starting the package's provider again: %v", err)
			return
		}
		stopProvider = stop
	})
}

func TestMain(m *testing.M) {
	if shardTests() {
		os.Exit(runShards())
	}
	world.QuietLogs()
	var err error
	w, err = world.Start(world.Options{WithWorkloads: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stopProvider, err = startProvider(w, writes)
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
		stopProvider()
	}
	if err := w.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := stopExternalWorld(); err != nil {
		fmt.Fprintln(os.Stderr, "the external-infra world:", err)
		code = 1
	}
	os.Exit(code)
}

// goldenRetention is how long the tests' provider keeps unused golden
// volumes.
const goldenRetention = 2 * time.Second

// providerNamespace is where the provider pretends to run; isolation opens
// port 22 of tenant VMs to it.
const providerNamespace = "capkv-system"

// writeCounter records the provider's requests that change something, so
// that a steady-state check can name what was written.
type writeCounter struct {
	mu     sync.Mutex
	writes []write
}

// write is one request that changed something.
type write struct {
	at           time.Time
	method, path string
}

func (w write) String() string {
	return fmt.Sprintf("%s %s %s", w.at.Format("15:04:05.000"), w.method, w.path)
}

func (c *writeCounter) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				c.mu.Lock()
				c.writes = append(c.writes, write{at: time.Now(), method: req.Method, path: req.URL.Path})
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
}

// count is how many writes the provider made so far.
func (c *writeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// atRest lists the writes after the first n, except those that end an
// Event series in another namespace than ns: client-go's events
// broadcaster (tools/events, finishSeries) patches a repeated Event once
// more, up to 12 minutes after its last repeat, so an earlier test's
// Events may end while a later one watches its own cluster at rest.
func (c *writeCounter) atRest(n int, ns string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.writes[n:] {
		if w.method == http.MethodPatch && strings.HasPrefix(w.path, "/apis/events.k8s.io/v1/namespaces/") &&
			!strings.HasPrefix(w.path, "/apis/events.k8s.io/v1/namespaces/"+ns+"/") {
			continue
		}
		out = append(out, w.String())
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// startProvider runs the provider's manager against the world's management
// cluster, counting its writes to the management and infra API servers.
func startProvider(w *world.World, counter *writeCounter) (func(), error) {
	cfg := rest.CopyConfig(w.Env.Config)
	counter.wrap(cfg)
	m, err := testenv.StartManager(cfg, w.ProviderOptions(manager.Options{
		KubevirtClusterConcurrency: 2, KubevirtMachineConcurrency: 10, KubevirtMachineTemplateConcurrency: 2,
		RecheckInterval: 500 * time.Millisecond, GoldenImageRetention: goldenRetention, ProviderNamespace: providerNamespace,
		// No Machine controller runs here, so no Machine gets a nodeRef:
		// NodeJoined would turn into a warning under a later test's
		// at-rest write count. pkg/machine's TestNodeJoin and the e2e
		// suite cover it.
		NodeJoinTimeout: 24 * time.Hour,
		// A third of the default, so that a step a test waits for is
		// written well within its 60 s waits on a busy machine.
		StatusSettleTime: 10 * time.Second,
		InProcess:        manager.InProcess{WrapInfraConfig: counter.wrap},
	}))
	if err != nil {
		return nil, err
	}
	return func() {
		if err := m.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "provider manager:", err)
		}
	}, nil
}

// eventually is Gomega's Eventually with the timeout these tests use.
func eventually(t *testing.T, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond)
}

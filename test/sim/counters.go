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

package sim

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Counters count what the simulated KubeVirt and CDI did, for tests and for
// the benchmark; they are also Prometheus metrics.
type Counters struct {
	mu     sync.Mutex
	values map[string]int64
	// inNamespace counts by namespace and name, so that tests in
	// namespaces of their own can count side by side.
	inNamespace map[[2]string]int64
	vec         *prometheus.CounterVec
	registry    *prometheus.Registry
}

// Counter names.
const (
	Imports            = "imports"
	ImportBytes        = "import_bytes"
	Clones             = "clones"
	SmartClones        = "smart_clones"
	HostAssistedClones = "host_assisted_clones"
	CloneBytes         = "clone_bytes"
	Snapshots          = "snapshots"
	GuestsJoined       = "guests_joined"
	GuestBootFailures  = "guest_boot_failures"
)

// counterNames are served from the start, at zero until something happens.
var counterNames = []string{Imports, ImportBytes, Clones, SmartClones, HostAssistedClones, CloneBytes, Snapshots, GuestsJoined, GuestBootFailures}

// NewCounters returns zeroed counters.
func NewCounters() *Counters {
	c := &Counters{
		values:      map[string]int64{},
		inNamespace: map[[2]string]int64{},
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capkv_sim_events_total",
			Help: "What the simulated KubeVirt and CDI did, by kind of event.",
		}, []string{"event"}),
		registry: prometheus.NewRegistry(),
	}
	c.registry.MustRegister(c.vec)
	for _, name := range counterNames {
		c.vec.WithLabelValues(name)
	}
	return c
}

// Add adds n to a counter.
func (c *Counters) Add(name string, n int64) {
	c.mu.Lock()
	c.values[name] += n
	c.mu.Unlock()
	c.vec.WithLabelValues(name).Add(float64(n))
}

// AddIn adds n to a counter for something done in a namespace.
func (c *Counters) AddIn(namespace, name string, n int64) {
	c.mu.Lock()
	c.inNamespace[[2]string{namespace, name}] += n
	c.mu.Unlock()
	c.Add(name, n)
}

// GetIn reads a counter of what was done in a namespace.
func (c *Counters) GetIn(namespace, name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inNamespace[[2]string{namespace, name}]
}

// Get reads a counter.
func (c *Counters) Get(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[name]
}

// Handler serves the counters in the Prometheus text format. Each simulator
// has its own registry, so several worlds can run in one process.
func (c *Counters) Handler() http.Handler {
	return promhttp.HandlerFor(c.registry, promhttp.HandlerOpts{})
}

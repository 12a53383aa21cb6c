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

package monitoring_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/monitoring"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var (
	w    *world.World
	prom *monitoring.Server
	// metricsAddr is the provider's metrics endpoint.
	metricsAddr string
)

// speedup is how much faster than on a real infra cluster machines move
// in this world (sim.Options.TimeScale 0.01 scales the simulated waits,
// not the real components'); the shipped alerts' waits are divided by it.
// At 15 the stuck-machine threshold was 60 s, and a healthy worker waiting
// for its control plane under three packages' load stayed 62 s in the
// bootstrap-data stage; at 10 it is 90 s.
const speedup = 10

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the world with the real Cluster API controllers, this
// provider's manager serving its metrics as main.go serves them, and the
// real Prometheus scraping them with the shipped settings.
func run(m *testing.M) int {
	world.QuietLogs()
	ctx := context.Background()
	opts := sim.DefaultOptions()
	var err error
	w, err = world.Start(world.Options{WithCAPI: true, Sim: &opts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the world:", err)
		return 1
	}
	defer stop("world", w.Stop)
	metrics, addr, err := monitoring.ProviderMetrics()
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics options:", err)
		return 1
	}
	metricsAddr = addr
	stopProvider, err := w.StartProvider(manager.Options{EnableWebhooks: true, Metrics: metrics})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the provider:", err)
		return 1
	}
	defer stop("provider", stopProvider)
	token, err := monitoring.ScraperToken(ctx, w.Env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scraper token:", err)
		return 1
	}
	prom, err = monitoring.Start(ctx, monitoring.Options{Target: metricsAddr, Token: token, Speedup: speedup})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting prometheus:", err)
		return 1
	}
	defer stop("prometheus", prom.Stop)
	return m.Run()
}

func stop(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the %s: %v\n", what, err)
	}
}

// within is how long a cluster of this world takes at most to come up
// on a loaded 2-core machine, and an alert to fire.
const within = 5 * time.Minute

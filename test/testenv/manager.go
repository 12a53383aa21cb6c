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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
)

// Manager is the provider's manager running in this process.
type Manager struct {
	// HealthAddr serves /healthz and /readyz, unless they were turned off.
	HealthAddr string

	cancel    context.CancelFunc
	stopped   chan error
	elected   <-chan struct{}
	competing chan struct{}
	cut       atomic.Bool
	err       error
	done      bool
}

// StartManager runs the provider's manager against cfg, built by
// manager.New exactly as main.go builds it, with o on top of what every
// in-process run needs: several managers in one process, no metrics
// listener, a free health port unless o sets one, and a sync period of 10
// hours unless o sets one, so that only watches drive the tests.
func StartManager(cfg *rest.Config, o manager.Options) (*Manager, error) {
	o.InProcess.SharedProcess = true
	if o.Metrics.BindAddress == "" {
		o.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	if o.HealthProbeBindAddress == "" {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		o.HealthProbeBindAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 10 * time.Hour
	}
	for _, n := range []*int{&o.KubevirtClusterConcurrency, &o.KubevirtMachineConcurrency, &o.KubevirtMachineTemplateConcurrency, &o.GoldenImageConcurrency} {
		if *n == 0 {
			*n = 2
		}
	}
	m := &Manager{HealthAddr: o.HealthProbeBindAddress, stopped: make(chan error, 1)}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(m.cuttable)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	mgr, err := manager.New(ctx, cfg, o)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the provider's manager: %w", err)
	}
	m.elected = mgr.Elected()
	m.competing = make(chan struct{})
	if err := mgr.Add(competingSignal(m.competing)); err != nil {
		cancel()
		return nil, err
	}
	go func() { m.stopped <- mgr.Start(ctx) }()
	return m, nil
}

// Elected is closed once the manager leads: at once without leader
// election, when it acquired the Lease with it.
func (m *Manager) Elected() <-chan struct{} { return m.elected }

// Competing is closed once the manager's caches have synced and it runs
// for the Lease: controller-runtime starts its leader elector right after
// the runnables that need no election, this signal among them. A replica
// that does not yet compete cannot take over from a crashed leader, so a
// handover measured before this includes the replica's own start.
func (m *Manager) Competing() <-chan struct{} { return m.competing }

// competingSignal closes its channel when the manager starts the
// runnables that run on every replica.
type competingSignal chan struct{}

func (c competingSignal) Start(context.Context) error {
	close(c)
	return nil
}

// NeedLeaderElection puts the signal among the runnables every replica
// runs, which start after the caches and before the leader elector.
func (competingSignal) NeedLeaderElection() bool { return false }

// Crash plays a replica killed with SIGKILL or by the OOM killer: from now
// on none of its requests to the management cluster reach it (in-flight
// ones fail, the leader election Lease is not given up), then it stops.
func (m *Manager) Crash() error {
	m.cut.Store(true)
	return m.Stop()
}

// cuttable fails every request once the manager crashed.
func (m *Manager) cuttable(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if m.cut.Load() {
			return nil, errCrashed
		}
		return rt.RoundTrip(req)
	})
}

var errCrashed = errors.New("the replica crashed")

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Stop stops the manager and returns the error it stopped with.
func (m *Manager) Stop() error {
	m.cancel()
	return m.wait()
}

// slowStop is how long a stopping manager may take before wait prints
// every goroutine of the process: controller-runtime gives its runnables
// 30 s, and a replica that holds its Lease that long stalls a handover.
const slowStop = 10 * time.Second

func (m *Manager) wait() error {
	if !m.done {
		select {
		case m.err = <-m.stopped:
		case <-time.After(slowStop):
			fmt.Fprintf(os.Stderr, "testenv: the provider's manager has not stopped after %s; goroutines:\n", slowStop)
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			m.err = <-m.stopped
		}
		m.done = true
	}
	return m.err
}

// Exited returns the manager's error when it stopped on its own, and
// ErrRunning while it runs.
func (m *Manager) Exited() error {
	if m.done {
		return m.err
	}
	select {
	case err := <-m.stopped:
		m.err, m.done = err, true
		return fmt.Errorf("manager exited: %w", err)
	default:
		return ErrRunning
	}
}

// ErrRunning is what Exited returns while the manager runs.
var ErrRunning = errors.New("the manager is running")

// Healthy reports whether /healthz and /readyz answer 200 and the manager
// has not exited.
func (m *Manager) Healthy() error {
	if err := m.Exited(); !errors.Is(err, ErrRunning) {
		return err
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + m.HealthAddr + path)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", path, resp.StatusCode)
		}
	}
	return nil
}

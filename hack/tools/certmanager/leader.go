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

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderOptions are the leader-election flags shared by both subcommands.
// Election is off by default because the tests run a single instance of
// each component and a lease would only slow start-up and shutdown.
type leaderOptions struct {
	enabled       bool
	namespace     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

// addFlags registers the leader-election flags with upstream's names and
// timings so the binary behaves like cert-manager when election is on.
func (l *leaderOptions) addFlags(fs *pflag.FlagSet, defaultNamespace string) {
	fs.BoolVar(&l.enabled, "leader-elect", false, "Elect a leader through a Lease before running any control loop.")
	fs.StringVar(&l.namespace, "leader-election-namespace", defaultNamespace, "Namespace of the leader-election Lease.")
	fs.DurationVar(&l.leaseDuration, "leader-election-lease-duration", 60*time.Second, "How long a Lease stays valid without renewal.")
	fs.DurationVar(&l.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "How long the leader keeps trying to renew before giving up.")
	fs.DurationVar(&l.retryPeriod, "leader-election-retry-period", 15*time.Second, "Wait between attempts to acquire or renew the Lease.")
}

// waitForLeadership blocks until this process may run its control loops.
// Without election it returns true at once. With election the elector runs
// inside g, so losing the Lease fails the group and stops the controllers,
// as upstream's controller does; it returns false if ctx ends first.
func (l *leaderOptions) waitForLeadership(ctx context.Context, g *errgroup.Group, client kubernetes.Interface, lockName string) (bool, error) {
	if !l.enabled {
		return true, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return false, fmt.Errorf("getting hostname for the leader identity: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, l.namespace, lockName,
		client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return false, fmt.Errorf("creating leader-election lock: %w", err)
	}
	elected := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.leaseDuration,
		RenewDeadline:   l.renewDeadline,
		RetryPeriod:     l.retryPeriod,
		ReleaseOnCancel: true,
		Name:            lockName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return false, fmt.Errorf("creating leader elector: %w", err)
	}
	g.Go(func() error {
		logf.FromContext(ctx).Info("waiting for leader election", "namespace", l.namespace, "lease", lockName)
		elector.Run(ctx)
		if ctx.Err() == nil {
			return errors.New("leader election lost")
		}
		return nil
	})
	select {
	case <-elected:
		return true, nil
	case <-ctx.Done():
		return false, nil
	}
}

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

// Package suite starts what the clusterctl suites (test/e2e, test/move,
// test/upgrade) share: a world running the real Cluster API controllers
// and cert-manager without this provider's CRDs, the real clusterctl with
// a local repository of this build's release artifacts, the world's
// management clusters as clusterctl reaches them and, after clusterctl
// init, the provider's pods on each; and stops it all again.
package suite

import (
	"context"
	"errors"

	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// ReleaseVersion is the version the suites give this build's release
// artifacts (out/) in clusterctl's local repository.
const ReleaseVersion = "v0.2.0"

// Options select what Start starts.
type Options struct {
	// World are the world's options. Start sets WithCAPI, WithCertManager
	// and WithoutProviderCRDs: clusterctl init installs the provider, its
	// CRDs included, beside the Cluster API providers, and its webhooks
	// need cert-manager.
	World world.Options
	// Version is the version of this build's release artifacts in
	// clusterctl's repository; "" means ReleaseVersion.
	Version string
	// Managements name the management clusters, as clusterctl reaches
	// them (their kubeconfig files): the first is the world's own, each
	// further one a management cluster of its own (World.StartManagement)
	// sharing the world's infra cluster. None means one, "management".
	Managements []string
}

// Setup is what Start started. A failed Start returns what it had started
// by then, so that Stop stops it: fields not reached stay nil or empty.
type Setup struct {
	World      *world.World
	Clusterctl *clusterctl.Clusterctl
	// Managements are the management clusters, in the order of
	// Options.Managements.
	Managements []clusterctl.Management
	// Providers run the pods of the provider's Deployment clusterctl init
	// installed, one per management cluster Init reached, in their order.
	Providers []*world.PodRunner
}

// Start starts the world and its further management clusters, and
// clusterctl with this build's release artifacts as o.Version; it runs no
// clusterctl init (Init does), so that a suite may first add releases or
// binaries to clusterctl. It always returns a Setup, for Stop.
func Start(o Options) (*Setup, error) {
	world.QuietLogs()
	o.World.WithCAPI, o.World.WithCertManager, o.World.WithoutProviderCRDs = true, true, true
	if o.Version == "" {
		o.Version = ReleaseVersion
	}
	if len(o.Managements) == 0 {
		o.Managements = []string{"management"}
	}
	s := &Setup{}
	var err error
	if s.World, err = world.Start(o.World); err != nil {
		return s, err
	}
	envs := []*testenv.Env{s.World.Env}
	for range o.Managements[1:] {
		m, err := s.World.StartManagement()
		if err != nil {
			return s, err
		}
		envs = append(envs, m.Env)
	}
	if s.Clusterctl, err = clusterctl.NewForWorld(o.Version); err != nil {
		return s, err
	}
	for i, env := range envs {
		m, err := s.Clusterctl.ManagementOf(env, o.Managements[i])
		if err != nil {
			return s, err
		}
		s.Managements = append(s.Managements, m)
	}
	return s, nil
}

// Init runs clusterctl init --infrastructure kubevirt:version on each
// management cluster in turn, as Clusterctl.Init does, and keeps each
// provider's runner in Providers. It returns what each init printed.
func (s *Setup) Init(ctx context.Context, version string) ([]string, error) {
	var outputs []string
	for _, m := range s.Managements {
		out, runner, err := s.Clusterctl.Init(ctx, m, version)
		outputs = append(outputs, out)
		if err != nil {
			return outputs, err
		}
		s.Providers = append(s.Providers, runner)
	}
	return outputs, nil
}

// Stop stops the providers' pods and the world, and removes clusterctl's
// directory: what a Start and Init, finished or not, started. It goes on
// past a failure and returns every error; a nil Setup (nothing started,
// as against a real cluster) stops nothing.
func (s *Setup) Stop() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, p := range s.Providers {
		errs = append(errs, p.Stop())
	}
	if s.World != nil {
		errs = append(errs, s.World.Stop())
	}
	if s.Clusterctl != nil {
		errs = append(errs, s.Clusterctl.Cleanup())
	}
	return errors.Join(errs...)
}

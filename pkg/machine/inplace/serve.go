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

package inplace

import (
	"context"
	"fmt"

	"k8s.io/utils/ptr"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Handler names, as Cluster API registers them:
// <handler>.<ExtensionConfig name>.
const (
	CanUpdateMachineHandler    = "can-update-machine"
	CanUpdateMachineSetHandler = "can-update-machineset"
	UpdateMachineHandler       = "update-machine"
)

// Serve adds the in-place update extension (discovery and the three
// hooks) to the manager's webhook server, so Cluster API reaches it at the
// webhook Service with the webhook certificate; an ExtensionConfig
// registers it (config/inplace). infra is asked whether a VM has
// somewhere to migrate to and whether its disks can grow.
func Serve(mgr ctrl.Manager, infra Infra) error {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return err
	}
	srv, err := server.New(server.Options{Catalog: catalog})
	if err != nil {
		return err
	}
	// Cluster API's server brings its own listener; the manager's serves
	// the paths instead.
	srv.Server = registerOnly{mgr.GetWebhookServer()}
	hooks := &Hooks{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Targets: infra, Claims: infra}
	turns := make(limiter, MaxConcurrentHookCalls)
	for _, h := range []server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachine, Name: CanUpdateMachineHandler, HandlerFunc: limited(turns, hooks.CanUpdateMachine)},
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: CanUpdateMachineSetHandler, HandlerFunc: limited(turns, hooks.CanUpdateMachineSet)},
		{Hook: runtimehooksv1.UpdateMachine, Name: UpdateMachineHandler, HandlerFunc: limited(turns, hooks.UpdateMachine)},
	} {
		h.TimeoutSeconds = ptr.To[int32](10)
		h.FailurePolicy = ptr.To(runtimehooksv1.FailurePolicyFail)
		if err := srv.AddExtensionHandler(h); err != nil {
			return fmt.Errorf("adding the %s handler: %w", h.Name, err)
		}
	}
	return mgr.Add(srv)
}

// Infra checks a machine's infra cluster for the hooks.
type Infra interface {
	Targets
	Claims
}

// registerOnly is a webhook server whose paths another server serves:
// Register goes to it, Start only waits for the end.
type registerOnly struct{ webhook.Server }

// Start waits until ctx ends; the wrapped server is the manager's to run.
func (registerOnly) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

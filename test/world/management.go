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

package world

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// managementClusters reads the world's management clusters: the first, and
// those StartManagement added (a tenant cluster moved there by clusterctl
// move keeps its VMs, guests and workload API server). Get returns the
// object from the first cluster that has it; List returns the items of all.
type managementClusters struct {
	readers []client.Reader
}

var _ client.Reader = &managementClusters{}

func (m *managementClusters) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var err error
	for _, r := range m.readers {
		if err = r.Get(ctx, key, obj, opts...); !apierrors.IsNotFound(err) {
			return err
		}
	}
	return err
}

func (m *managementClusters) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var all []runtime.Object
	for _, r := range m.readers {
		if err := r.List(ctx, list, opts...); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		all = append(all, items...)
	}
	return meta.SetList(list, all)
}

// Management is a further management cluster of the world: its own API
// server, scheduler, controller-manager and cert-manager, and the real
// Cluster API controllers, without CAPKV's CRDs (clusterctl init installs
// them), sharing the world's infra cluster, simulator and workload
// clusters.
type Management struct {
	Env  *testenv.Env
	capi *capiManagers
}

// StartManagement starts a further management cluster, stopped with the
// world. The world's infra cluster should be external (Options.ExternalInfra):
// a tenant whose infra cluster is a management cluster cannot move.
func (w *World) StartManagement() (*Management, error) {
	if w.Workloads == nil {
		return nil, errors.New("a further management cluster needs the world's workload clusters (WithCAPI)")
	}
	env, err := testenv.Start(testenv.Options{WithKubeComponents: true, WithCAPIWebhooks: true, WithoutProviderCRDs: true})
	if err != nil {
		return nil, err
	}
	m := &Management{Env: env}
	// Its pods reach the same guests, through the same network.
	env.GuestProxy = w.Env.GuestProxy
	if err := env.StartCertManager(); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if m.capi, err = startCAPI(env, false); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	w.managements.readers = append(w.managements.readers, env.Client)
	w.moreManagements = append(w.moreManagements, m)
	return m, nil
}

func (m *Management) stop() error {
	return errors.Join(m.capi.stop(), m.Env.Stop())
}

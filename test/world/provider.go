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
	"errors"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// ProviderNamespace is where the world's provider manager pretends to run.
const ProviderNamespace = "capkv-system"

// ManagementNodeAddress is where, in a world with an external infra
// cluster, the provider's connections to guests come from: a node of the
// management cluster, outside the infra cluster's pod network.
const ManagementNodeAddress = "192.0.2.50"

// StartProvider runs the provider's manager against the world's management
// cluster (testenv.StartManager) with ProviderOptions(o). It returns a
// function that stops the manager and waits for it.
//
// With o.EnableWebhooks and no webhook server of its own, the provider
// serves its admission webhooks as a real install does: the world
// registers the webhook configuration the release ships with the API
// server, pointed at the manager, and waits until it serves.
func (w *World) StartProvider(o manager.Options) (func() error, error) {
	serveWebhooks := o.EnableWebhooks && o.WebhookCertDir == ""
	if serveWebhooks {
		if w.providerWebhooks == nil {
			install, err := testenv.InstallProviderWebhooks(w.Env.Config)
			if err != nil {
				return nil, err
			}
			w.providerWebhooks = install
		}
		o.WebhookHost, o.WebhookPort = w.providerWebhooks.LocalServingHost, w.providerWebhooks.LocalServingPort
		o.WebhookCertDir = w.providerWebhooks.LocalServingCertDir
	}
	m, err := testenv.StartManager(w.Env.Config, w.ProviderOptions(o))
	if err != nil {
		return nil, err
	}
	if serveWebhooks {
		if err := m.WaitServing(testenv.WebhookAddress(w.providerWebhooks)); err != nil {
			return nil, errors.Join(err, m.Stop())
		}
	}
	return m.Stop, nil
}

// ProviderOptions are o on top of the world's defaults for the provider:
// the simulated guests' SSH, the provider namespace isolation opens port 22
// to, IPv4 only (the simulated infra cluster has no IPv6), and 4 workers per
// controller.
func (w *World) ProviderOptions(o manager.Options) manager.Options {
	if o.InProcess.DialGuest == nil {
		o.InProcess.DialGuest = w.Sim.DialGuest
	}
	if o.ProviderNamespace == "" {
		o.ProviderNamespace = ProviderNamespace
	}
	if o.IsolationIPFamilies == nil {
		o.IsolationIPFamilies = []string{"IPv4"}
	}
	for _, n := range []*int{&o.KubevirtClusterConcurrency, &o.KubevirtMachineConcurrency, &o.KubevirtMachineTemplateConcurrency, &o.GoldenImageConcurrency} {
		if *n == 0 {
			*n = 4
		}
	}
	return o
}

// AdminUser is the user of the world's admin kubeconfig.
const AdminUser = "world-admin"

// WriteKubeconfig writes a kubeconfig of the management cluster to path
// that authenticates as user, a cluster administrator: for kubectl,
// clusterctl, or a provider running as its own process whose requests the
// API server's audit log can tell apart by that name.
func (w *World) WriteKubeconfig(path, userName string) error {
	return w.Env.WriteKubeconfig(path, userName)
}

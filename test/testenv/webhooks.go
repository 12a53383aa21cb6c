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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ProviderWebhookManifests is the provider's webhook configuration as
// controller-gen writes it; the release ships it with only the Service and
// the CA bundle filled in.
func ProviderWebhookManifests() string {
	return filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml")
}

// InstallProviderWebhooks registers the provider's mutating and validating
// webhook configurations with the API server at cfg, pointed at a local
// server with a serving certificate of their own, for a manager to serve
// (WebhookAddress). Cleanup removes the certificate.
func InstallProviderWebhooks(cfg *rest.Config) (*envtest.WebhookInstallOptions, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	install := &envtest.WebhookInstallOptions{Paths: []string{ProviderWebhookManifests()}, LocalServingHost: "127.0.0.1", LocalServingPort: port}
	if err := install.Install(cfg); err != nil {
		return nil, fmt.Errorf("installing the provider's webhook configurations: %w", err)
	}
	return install, nil
}

// WebhookAddress is where the API server calls the webhooks of install.
func WebhookAddress(install *envtest.WebhookInstallOptions) string {
	return net.JoinHostPort(install.LocalServingHost, strconv.Itoa(install.LocalServingPort))
}

// WaitServing waits until the manager's webhook server accepts TLS
// connections at addr, or the manager exits.
func (m *Manager) WaitServing(addr string) error {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			if err := m.Exited(); !errors.Is(err, ErrRunning) {
				return false, fmt.Errorf("manager stopped before serving webhooks: %w", err)
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether TLS answers
			if err != nil {
				return false, nil
			}
			return true, conn.Close()
		})
	if err != nil {
		return fmt.Errorf("waiting for the webhook server at %s: %w", addr, err)
	}
	return nil
}

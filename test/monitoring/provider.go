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

package monitoring

import (
	"net"
	"strconv"

	"sigs.k8s.io/cluster-api/util/flags"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// ProviderMetrics configures the provider's metrics endpoint as main.go
// configures it from --diagnostics-address, on a free loopback port: HTTPS
// with a self-signed certificate, every request authenticated with a
// TokenReview and authorized with a SubjectAccessReview. It returns the
// options for manager.Options.Metrics and the address to scrape.
func ProviderMetrics() (metricsserver.Options, string, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return metricsserver.Options{}, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	_, o, err := flags.GetManagerOptions(flags.ManagerOptions{DiagnosticsAddress: addr})
	if err != nil {
		return metricsserver.Options{}, "", err
	}
	return *o, addr, nil
}

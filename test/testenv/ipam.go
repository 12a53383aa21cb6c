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
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// IPAMProvider is the name clusterctl gives Cluster API's in-cluster IPAM
// provider; its CRDs carry it in the provider label.
const IPAMProvider = "ipam-in-cluster"

// ipamCRDs reads the pool CRDs of the in-cluster IPAM provider that
// hack/build-tools.sh copied from its release into bin/ipam-crds.yaml,
// labelled as clusterctl labels what it installs, so that clusterctl move
// takes pools along.
func ipamCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	path := filepath.Join(BinDir(), "ipam-crds.yaml")
	data, err := os.ReadFile(path) //nolint:gosec // built by this repository
	if err != nil {
		return nil, fmt.Errorf("reading the in-cluster IPAM provider's CRDs (make tools builds them): %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		addLabels(crd, map[string]string{ClusterctlLabel: "", ProviderLabel: IPAMProvider})
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", path)
	}
	return crds, nil
}

// StartIPAM runs Cluster API's in-cluster IPAM provider (v1.1.0, the real
// release built into bin/) against this API server, as its Deployment
// would: it answers IPAddressClaims against InClusterIPPools and
// GlobalInClusterIPPools. Its webhooks, which only validate pools, are off;
// so are its metrics and probes, which would take fixed ports.
func (e *Env) StartIPAM() error {
	kubeconfig, err := e.componentsKubeconfig()
	if err != nil {
		return err
	}
	return e.startProcess(BinDir(), "ipam-in-cluster", "ipam-in-cluster", []string{
		"--kubeconfig", kubeconfig, "--webhook-port", "0", "--health-probe-bind-address", "0",
		"--diagnostics-address", "0", "--insecure-diagnostics",
	})
}

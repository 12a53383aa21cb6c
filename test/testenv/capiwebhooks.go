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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// capiWebhookInstallOptions reads the webhook configurations of Cluster API
// core, the kubeadm bootstrap provider and the kubeadm control plane from
// the module cache. Each file names its configurations alike (kustomize
// prefixes them in a real install), so a suffix keeps them apart. Every CRD
// gets a conversion webhook, as Cluster API's CRDs serve v1beta1 and
// v1beta2 and their types convert through registered converters rather
// than the scheme.
func capiWebhookInstallOptions() (envtest.WebhookInstallOptions, error) {
	capi, err := ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return envtest.WebhookInstallOptions{}, err
	}
	port, err := FreePort()
	if err != nil {
		return envtest.WebhookInstallOptions{}, err
	}
	opts := envtest.WebhookInstallOptions{IgnoreSchemeConvertible: true, LocalServingHost: "127.0.0.1", LocalServingPort: port}
	for suffix, dir := range map[string]string{"core": "core", "bootstrap": "bootstrap/kubeadm", "controlplane": "controlplane/kubeadm"} {
		data, err := os.ReadFile(filepath.Join(capi, dir, "config", "webhook", "manifests.yaml")) //nolint:gosec // module cache file
		if err != nil {
			return opts, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			raw := map[string]any{}
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return opts, fmt.Errorf("parsing %s webhooks: %w", dir, err)
			}
			doc, err := yamlOf(raw)
			if err != nil {
				return opts, err
			}
			switch raw["kind"] {
			case "MutatingWebhookConfiguration":
				m := &admissionv1.MutatingWebhookConfiguration{}
				if err := utilyaml.Unmarshal(doc, m); err != nil {
					return opts, err
				}
				m.Name += "-" + suffix
				opts.MutatingWebhooks = append(opts.MutatingWebhooks, m)
			case "ValidatingWebhookConfiguration":
				v := &admissionv1.ValidatingWebhookConfiguration{}
				if err := utilyaml.Unmarshal(doc, v); err != nil {
					return opts, err
				}
				v.Name += "-" + suffix
				opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, v)
			}
		}
	}
	return opts, nil
}

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

package clusterctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	clusterctlmanifest "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Provider is a Cluster API provider the world runs in-process, as
// clusterctl's inventory records it.
type Provider struct {
	// Name and Type are clusterctl's provider name and type.
	Name, Type string
	// Label is clusterctl's manifest label: the repository directory and
	// the Provider object's name.
	Label string
	// Namespace is where clusterctl would have installed it.
	Namespace string
	// Components is the components file name of its repository.
	Components string
	// Version is the Cluster API version the world runs.
	Version string
}

// InProcessProviders are the Cluster API providers the world runs
// in-process: core, kubeadm bootstrap and kubeadm control plane.
func InProcessProviders(version string) []Provider {
	return []Provider{
		{Name: "cluster-api", Type: "CoreProvider", Label: "cluster-api", Namespace: "capi-system", Components: "core-components.yaml", Version: version},
		{Name: "kubeadm", Type: "BootstrapProvider", Label: "bootstrap-kubeadm", Namespace: "capi-kubeadm-bootstrap-system", Components: "bootstrap-components.yaml", Version: version},
		{Name: "kubeadm", Type: "ControlPlaneProvider", Label: "control-plane-kubeadm", Namespace: "capi-kubeadm-control-plane-system", Components: "control-plane-components.yaml", Version: version},
	}
}

// RegisterInProcessProviders records the world's in-process Cluster API
// providers in clusterctl's inventory of the cluster at cfg, as if
// clusterctl had installed them: clusterctl init then installs only the
// providers it is asked for, and move and upgrade find the providers they
// check.
func RegisterInProcessProviders(ctx context.Context, cfg *rest.Config, c client.Client, version string) error {
	if err := installInventoryCRD(cfg); err != nil {
		return err
	}
	for _, p := range InProcessProviders(version) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3",
			"kind":       "Provider",
			"metadata": map[string]any{
				"name": p.Label, "namespace": p.Namespace,
				"labels": map[string]any{testenv.ClusterctlLabel: "", "clusterctl.cluster.x-k8s.io/core": "inventory", testenv.ProviderLabel: p.Label},
			},
			"providerName": p.Name,
			"type":         p.Type,
			"version":      p.Version,
		}}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering %s in clusterctl's inventory: %w", p.Label, err)
		}
	}
	return nil
}

// installInventoryCRD installs clusterctl's inventory CRD from the manifest
// clusterctl itself embeds, as its first init would.
func installInventoryCRD(cfg *rest.Config) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(clusterctlmanifest.ClusterctlAPIManifest), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := dec.Decode(crd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading clusterctl's inventory CRD: %w", err)
		}
		if crd.Name == "" {
			continue
		}
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels["clusterctl.cluster.x-k8s.io/core"] = "inventory"
		crds = append(crds, crd)
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, MaxTime: testenv.CRDWait})
	return err
}

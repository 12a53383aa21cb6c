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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// ApplyClusterTemplate renders templates/cluster-template.yaml as
// `clusterctl generate cluster` does, with vars (unset variables take the
// template's defaults), and creates every object through c.
func ApplyClusterTemplate(ctx context.Context, c client.Client, vars map[string]string) error {
	return ApplyTemplateFile(ctx, c, filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml"), vars)
}

// ApplyTemplateFile renders the clusterctl template at path with vars and
// creates every object through c.
func ApplyTemplateFile(ctx context.Context, c client.Client, path string, vars map[string]string) error {
	return ApplyTemplateFileWith(ctx, c, path, vars, nil)
}

// ApplyTemplateFileWith is ApplyTemplateFile with ApplyYAMLWith's mutate,
// so that a caller can rewrite the rendered objects (the benchmark swaps
// the infrastructure kinds for the world's own) without rendering again.
func ApplyTemplateFileWith(ctx context.Context, c client.Client, path string, vars map[string]string, mutate func(*unstructured.Unstructured) error) error {
	raw, err := testenv.ReadTemplate(path)
	if err != nil {
		return err
	}
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	if err != nil {
		return fmt.Errorf("rendering the cluster template: %w", err)
	}
	return ApplyYAMLWith(ctx, c, out, mutate)
}

// CNILabels are the labels by which the flavors' CNI ClusterResourceSet
// selects a Cluster (docs/cni.md).
func CNILabels(cluster string) map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: cluster, "cni.capkv.io/name": "flannel"}
}

// ApplyCNIAddon creates, for a Cluster built by hand, the CNI
// ClusterResourceSet and manifests the flavors carry; the Cluster needs
// CNILabels for it to apply.
func ApplyCNIAddon(ctx context.Context, c client.Client, namespace, cluster string) error {
	return ApplyTemplateFile(ctx, c, filepath.Join(testenv.RepoRoot(), testenv.FlavorAddons[0]),
		map[string]string{"CLUSTER_NAME": cluster, "NAMESPACE": namespace})
}

// InstallCNI gives an existing Cluster the flavors' CNI, as a user of
// manifests without one installs their own: ApplyCNIAddon, then CNILabels
// on the Cluster.
func InstallCNI(ctx context.Context, c client.Client, namespace, cluster string) error {
	if err := ApplyCNIAddon(ctx, c, namespace, cluster); err != nil {
		return err
	}
	obj := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, obj); err != nil {
		return err
	}
	patch := client.MergeFrom(obj.DeepCopy())
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	maps.Copy(obj.Labels, CNILabels(cluster))
	return c.Patch(ctx, obj, patch)
}

// ApplyYAML creates every object of a multi-document YAML through c, as
// kubectl create -f does with what clusterctl generate cluster prints.
func ApplyYAML(ctx context.Context, c client.Client, data []byte) error {
	return ApplyYAMLWith(ctx, c, data, nil)
}

// ErrSkipObject, returned by ApplyYAMLWith's mutate, leaves the object out.
var ErrSkipObject = errors.New("skip this object")

// ApplyYAMLWith is ApplyYAML with mutate, when set, called on each object
// before it is created, as a user edits generated manifests.
func ApplyYAMLWith(ctx context.Context, c client.Client, data []byte, mutate func(*unstructured.Unstructured) error) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if mutate != nil {
			if err := mutate(u); errors.Is(err, ErrSkipObject) {
				continue
			} else if err != nil {
				return err
			}
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// InstallInstancetypes creates the instance types and preference of
// config/instancetypes on the infra cluster, as an admin applies the
// release's instancetypes.yaml; those already there are kept.
func InstallInstancetypes(ctx context.Context, c client.Client) error {
	for _, f := range []string{"standard.yaml", "sockets-advantage.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "instancetypes", f)) //nolint:gosec // a file of this repository
		if err != nil {
			return err
		}
		if err := CreateMissing(ctx, c, data); err != nil {
			return err
		}
	}
	return nil
}

// CreateMissing is ApplyYAML for the objects that do not exist yet: those
// already there are kept as they are, as a second install leaves them.
func CreateMissing(ctx context.Context, c client.Client, data []byte) error {
	return ApplyYAMLWith(ctx, c, data, func(u *unstructured.Unstructured) error {
		err := c.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
		switch {
		case err == nil:
			return ErrSkipObject
		case apierrors.IsNotFound(err):
			return nil
		}
		return err
	})
}

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
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVirtVersion is the KubeVirt release whose virt-api and
// virt-controller the test world runs (hack/tools/kubevirt pins it).
const KubeVirtVersion = "v1.7.0"

// KubeVirtNamespace is where the world installs KubeVirt, as its
// documentation does.
const KubeVirtNamespace = "kubevirt"

// kubeVirtInstallSet is what virt-operator would install, dumped by
// hack/build-tools.sh from KubeVirt's own install strategy: the KubeVirt
// CRD and CR, then what virt-operator installs for them.
var kubeVirtInstallSet = &installSet{file: "kubevirt-install.yaml", what: "KubeVirt's"}

// KubeVirtInstall reads bin/kubevirt-install.yaml once.
func KubeVirtInstall() ([]*unstructured.Unstructured, error) {
	return kubeVirtInstallSet.read()
}

// installSet is a multi-document YAML file hack/build-tools.sh writes into
// bin/, read once.
type installSet struct {
	file, what string

	once sync.Once
	objs []*unstructured.Unstructured
	err  error
}

func (s *installSet) read() ([]*unstructured.Unstructured, error) {
	s.once.Do(func() {
		path := filepath.Join(BinDir(), s.file)
		data, err := os.ReadFile(path) //nolint:gosec // written by hack/build-tools.sh
		if err != nil {
			s.err = fmt.Errorf("reading %s install set: %w (run 'make tools')", s.what, err)
			return
		}
		reader := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := reader.Decode(&obj.Object); err != nil {
				if !errors.Is(err, io.EOF) {
					s.err = fmt.Errorf("parsing %s: %w", path, err)
				}
				return
			}
			if len(obj.Object) > 0 {
				unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
				unstructured.RemoveNestedField(obj.Object, "status")
				s.objs = append(s.objs, obj)
			}
		}
	})
	return s.objs, s.err
}

// kubeVirtCRDs are KubeVirt's own CRDs, from its install set: the world
// serves exactly the schema a KubeVirt v1.7 cluster serves.
func kubeVirtCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := KubeVirtInstall()
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return nil, fmt.Errorf("reading CRD %s: %w", o.GetName(), err)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, errors.New("KubeVirt's install set has no CRDs")
	}
	return crds, nil
}

// installKubeVirtCRDs installs KubeVirt's CRDs as KubeVirt ships them, apart
// from envtest's CRD list: envtest would point the conversion of every kind
// the scheme can convert at the world's conversion webhook server, which
// serves Cluster API's kinds only.
func installKubeVirtCRDs(cfg *rest.Config) error {
	crds, err := kubeVirtCRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, MaxTime: CRDWait}); err != nil {
		return fmt.Errorf("installing KubeVirt's CRDs: %w", err)
	}
	return nil
}

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
	"strings"
)

// FlavorsDir holds the flavors' sources: one kustomize overlay directory per
// flavor, and base, which is not a flavor (docs/flavors.md). make generate
// renders each into templates/ (FlavorTemplate).
var FlavorsDir = filepath.Join("templates", "flavors")

// Flavors are the names of the flavors, as clusterctl's --flavor takes them
// ("default" for none): the directories of FlavorsDir but base, in order.
// A new flavor is a new directory there, and every test that runs the
// flavors finds it.
func Flavors() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(RepoRoot(), FlavorsDir))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "base" && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no flavor in %s", FlavorsDir)
	}
	return names, nil
}

// FlavorTemplate is the file of templates/ make generate renders a flavor
// into, and clusterctl reads from the release: cluster-template.yaml for
// default, else cluster-template-NAME.yaml.
func FlavorTemplate(flavor string) string {
	if flavor == "default" {
		return filepath.Join(RepoRoot(), "templates", "cluster-template.yaml")
	}
	return filepath.Join(RepoRoot(), "templates", "cluster-template-"+flavor+".yaml")
}

// FlavorAddons are the files `make release-manifests` appends to every
// cluster-template*.yaml of templates/: the CNI's ClusterResourceSet.
var FlavorAddons = []string{filepath.Join("templates", "addons", "cni-flannel.yaml")}

// ReadTemplate reads a clusterctl template as the release carries it: a
// flavor of templates/ with FlavorAddons appended.
func ReadTemplate(path string) ([]byte, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // a template the caller chose
	if err != nil {
		return nil, err
	}
	root := RepoRoot()
	if filepath.Dir(path) != filepath.Join(root, "templates") || !strings.HasPrefix(filepath.Base(path), "cluster-template") {
		return raw, nil
	}
	for _, addon := range FlavorAddons {
		data, err := os.ReadFile(filepath.Join(root, addon)) //nolint:gosec // a file of this repository
		if err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(raw, []byte("\n")) {
			raw = append(raw, '\n')
		}
		raw = append(append(raw, "---\n"...), data...)
	}
	return raw, nil
}

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

// Command render-flavors writes the clusterctl flavors of templates/ from
// their kustomize overlays: `render-flavors FLAVORS_DIR OUT_DIR` builds
// every directory of FLAVORS_DIR but base (templates/flavors/NAME) with
// kustomize, at the version of this module, and writes it to
// OUT_DIR/cluster-template-NAME.yaml (cluster-template.yaml for NAME
// default), after the lines of the overlay's header.txt. It removes every
// other OUT_DIR/cluster-template*.yaml, so that the rendered flavors are
// exactly the overlays. A FLAVORS_DIR with a base is the release's and
// must have a default; one without (the e2e suite's test flavors,
// test/e2e/testdata/flavors) holds overlays of the release's flavors.
//
// It is `kustomize build --reorder none` except for how each object is
// written: kustomize build writes an object through JSON, which drops its
// comments, sorts its keys and requotes its strings; this writes the YAML
// nodes kustomize built, so that the comments of the base and of the
// patches, the order of fields and the quoting the files have reach the
// rendered flavor (fields a patch adds come after the fields the object
// had). A flavor is read by people choosing it; its comments say what its
// fields are for.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// baseDir is the directory of FLAVORS_DIR that is not a flavor: the
// objects the flavors start from.
const baseDir = "base"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: render-flavors FLAVORS_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "render-flavors:", err)
		os.Exit(1)
	}
}

func run(flavorsDir, outDir string) error {
	entries, err := os.ReadDir(flavorsDir)
	if err != nil {
		return err
	}
	written := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == baseDir || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out, err := render(filepath.Join(flavorsDir, e.Name()))
		if err != nil {
			return fmt.Errorf("flavor %s: %w", e.Name(), err)
		}
		name := "cluster-template.yaml"
		if e.Name() != "default" {
			name = "cluster-template-" + e.Name() + ".yaml"
		}
		if err := writeFile(filepath.Join(outDir, name), out); err != nil {
			return err
		}
		written[name] = true
	}
	if _, err := os.Stat(filepath.Join(flavorsDir, baseDir)); err == nil && !written["cluster-template.yaml"] {
		return fmt.Errorf("%s has no directory default, the default flavor", flavorsDir)
	}
	stale, err := filepath.Glob(filepath.Join(outDir, "cluster-template*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if !written[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "removed %s: no directory of %s renders it\n", f, flavorsDir)
		}
	}
	return nil
}

// render builds one overlay and returns its header.txt and its objects,
// one YAML document each.
func render(dir string) ([]byte, error) {
	header, err := os.ReadFile(filepath.Join(dir, "header.txt")) //nolint:gosec // a file of this repository
	if err != nil {
		return nil, fmt.Errorf("every flavor starts with a header.txt that names it and says what it is for: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(header), "\n"), "\n")
	if i := slices.IndexFunc(lines, func(l string) bool { return !strings.HasPrefix(l, "#") }); i >= 0 {
		return nil, fmt.Errorf("line %d of header.txt is not a YAML comment (#): %q", i+1, lines[i])
	}
	steps, err := kustomizations(dir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(strings.Join(lines, "\n") + "\n")
	objects := 0
	for _, step := range steps {
		// The default options: the objects in the order of the resources,
		// files loaded only from within each kustomization, no plugins.
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), step)
		if err != nil {
			return nil, err
		}
		if m.Size() == 0 {
			return nil, fmt.Errorf("%s: no objects", step)
		}
		for _, r := range m.Resources() {
			if objects > 0 {
				b.WriteString("---\n")
			}
			objects++
			s, err := r.RNode.String()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.CurId(), err)
			}
			b.WriteString(s)
		}
	}
	return b.Bytes(), nil
}

// kustomizations are the kustomizations a flavor renders, in order: its
// directory, or, when that has no kustomization.yaml, each of its
// subdirectories by name. The second is for a flavor applied in steps
// whose objects repeat (Cluster API's KCP adoption spec applies a Cluster,
// then the same Cluster with a control plane), which one kustomization
// cannot hold.
func kustomizations(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, "kustomization.yaml")); err == nil {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var steps []string
	for _, e := range entries {
		if e.IsDir() {
			steps = append(steps, filepath.Join(dir, e.Name()))
		}
	}
	if len(steps) == 0 {
		return nil, errors.New("no kustomization.yaml, and no directory of steps")
	}
	return steps, nil
}

// writeFile replaces path with data only when they differ, through a
// temporary file, so that an interrupted run leaves the old file whole.
func writeFile(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) { //nolint:gosec // a file of this repository
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // a template, read by everyone
		return err
	}
	return os.Rename(tmp, path)
}

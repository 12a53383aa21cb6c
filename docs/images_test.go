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

package docs

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// imageKey matches a container's image, and a VM's node image under
	// url: (a variable whose name says it is an image).
	imageKey = regexp.MustCompile(`^\s*(?:- )?(image|url):\s*(.*)$`)
	// variable is ${VAR:=default}, the default possibly holding ${...}.
	variable = regexp.MustCompile(`^\$\{([A-Z0-9_]+):=(.+)\}$`)
	// kubernetesVersion is the version variable inside a node image's
	// default, which the page writes without its default.
	kubernetesVersion = regexp.MustCompile(`\$\{KUBERNETES_VERSION:=[^}]+\}`)
	// imageRow is a row of flavors.md's images table.
	imageRow = regexp.MustCompile("^\\| `([^`]+)` \\| `([A-Z0-9_]+)`")
)

// TestEveryTemplateImageIsAPinnedVariable reads every image of the flavors
// and the CNI addon: each must be a variable (so that a mirror can replace
// it) with a default, a container image's pinned (a tag, not latest), and
// flavors.md's "Images a cluster pulls" must have exactly these rows.
func TestEveryTemplateImageIsAPinnedVariable(t *testing.T) {
	files, err := filepath.Glob("../templates/cluster-template*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../templates/addons/cni-flannel.yaml", "../templates/clusterclass-kubevirt.yaml")
	found := map[string]string{}
	for _, f := range files {
		for i, line := range strings.Split(read(t, f), "\n") {
			m := imageKey.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			where := f + ":" + strconv.Itoa(i+1)
			value, _, _ := strings.Cut(m[2], " #")
			value = strings.Trim(strings.TrimSpace(value), `"'`)
			if value == "" || strings.HasPrefix(value, "{{") {
				continue // a nested block, or the ClusterClass's patch template
			}
			v := variable.FindStringSubmatch(value)
			if m[1] == "url" && (v == nil || !strings.HasSuffix(v[1], "IMAGE") && !strings.HasSuffix(v[1], "IMAGE_URL")) {
				continue // a URL that is not a node image
			}
			if v == nil {
				t.Errorf("%s: image %s is not a variable with a default", where, value)
				continue
			}
			name, image := v[1], kubernetesVersion.ReplaceAllLiteralString(v[2], "${KUBERNETES_VERSION}")
			if m[1] == "image" {
				tag := image[strings.LastIndex(image, "/")+1:]
				if !strings.ContainsAny(tag, ":@") || strings.HasSuffix(image, ":latest") {
					t.Errorf("%s: %s defaults to %s, which is not pinned", where, name, image)
				}
			}
			if other, ok := found[name]; ok && other != image {
				t.Errorf("%s: %s defaults to %s here and %s elsewhere", where, name, image, other)
			}
			found[name] = image
		}
	}
	rows := map[string]string{}
	inTable := false
	for _, line := range strings.Split(read(t, "flavors.md"), "\n") {
		if strings.HasPrefix(line, "## ") {
			inTable = line == "## Images a cluster pulls"
		}
		if m := imageRow.FindStringSubmatch(line); inTable && m != nil {
			rows[m[2]] = m[1]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		if rows[name] != found[name] {
			t.Errorf("flavors.md's images a cluster pulls: %s is %q, the templates' default %q", name, rows[name], found[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		if _, ok := found[name]; !ok {
			t.Errorf("flavors.md's images a cluster pulls has %s, which no template uses", name)
		}
	}
	if len(found) < 10 {
		t.Fatalf("found only %d image variables; the scan is broken", len(found))
	}
}

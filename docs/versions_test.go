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
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestVersionsPageFollowsThePins reads the versions the build pins and
// checks that versions.md names each, so the page cannot fall behind a
// renovation.
func TestVersionsPageFollowsThePins(t *testing.T) {
	page := read(t, "versions.md")
	pins := []struct{ file, module string }{
		{"../go.mod", "sigs.k8s.io/cluster-api"},
		{"../hack/tools/clusterctl/go.mod", "sigs.k8s.io/cluster-api"},
		{"../hack/tools/certmanager/go.mod", "github.com/cert-manager/cert-manager"},
		{"../hack/tools/kubevirt/go.mod", "kubevirt.io/kubevirt"},
		{"../hack/tools/cdi/go.mod", "kubevirt.io/containerized-data-importer"},
		{"../hack/tools/kube/go.mod", "k8s.io/kubernetes"},
		{"../hack/tools/ipam/go.mod", "sigs.k8s.io/cluster-api-ipam-provider-in-cluster"},
		{"../hack/tools/prometheus/go.mod", "github.com/prometheus/prometheus"},
	}
	for _, p := range pins {
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(p.module) + `\s+(v\S+)`).FindStringSubmatch(read(t, p.file))
		if m == nil {
			t.Errorf("%s does not require %s", p.file, p.module)
			continue
		}
		if !strings.Contains(page, m[1]) {
			t.Errorf("versions.md does not name %s %s (%s)", p.module, m[1], p.file)
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(read(t, "../go.mod"))
	if goVersion == nil || !strings.Contains(page, "| Go | "+goVersion[1]+" |") {
		t.Errorf("versions.md does not name the Go version of go.mod (%v)", goVersion)
	}
	kube := regexp.MustCompile(`\$\{KUBERNETES_VERSION:=(v[0-9.]+)\}`).FindStringSubmatch(read(t, "../templates/cluster-template.yaml"))
	if kube == nil || !strings.Contains(page, kube[1]+" by default") {
		t.Errorf("versions.md does not name the flavors' default Kubernetes version (%v)", kube)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

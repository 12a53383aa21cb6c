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
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestClusterctlSharesTheTestModulesVersions keeps the clusterctl tool
// module on the test module's version of every module both require, so
// that on a fresh machine the packages they share compile once
// (hack/tools/clusterctl/go.mod says why; docs/testing.md, "Tools once per
// machine").
func TestClusterctlSharesTheTestModulesVersions(t *testing.T) {
	versions := func(path string) map[string]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.ParseLax(path, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range f.Require {
			out[r.Mod.Path] = r.Mod.Version
		}
		return out
	}
	test := versions(filepath.Join(RepoRoot(), "test", "go.mod"))
	shared := 0
	for path, version := range versions(filepath.Join(RepoRoot(), "hack", "tools", "clusterctl", "go.mod")) {
		if want, ok := test[path]; ok {
			shared++
			if version != want {
				t.Errorf("hack/tools/clusterctl requires %s %s, the test module %s: raise the lower one (go get %s@<the higher>) in its module", path, version, want, path)
			}
		}
	}
	if shared < 50 {
		t.Errorf("only %d modules shared with the test module: is hack/tools/clusterctl/go.mod still the tool module?", shared)
	}
}

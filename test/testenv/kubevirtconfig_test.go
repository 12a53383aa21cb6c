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
	"strings"
	"testing"
)

// TestKubeVirtPatchesAreTheDocs holds the tests to what a platform
// engineer is told: each patch they apply is in its doc, word for word, as
// a kubectl patch of the KubeVirt CR.
func TestKubeVirtPatchesAreTheDocs(t *testing.T) {
	for doc, patches := range map[string][]string{
		"in-place-updates.md": {LiveMigrateUpdatesPatch, ExpandDisksPatch},
		"tenant-cloud.md":     {HotplugVolumesPatch},
	} {
		raw, err := os.ReadFile(filepath.Join(RepoRoot(), "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(raw), "\\\n", " ")), " ")
		for _, p := range patches {
			if want := "kubectl patch kubevirt -n kubevirt kubevirt --type merge -p '" + p + "'"; !strings.Contains(text, want) {
				t.Errorf("docs/%s does not give %s", doc, want)
			}
		}
	}
}

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

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// repositoryEntry is a provider of `clusterctl config repositories -o yaml`.
type repositoryEntry struct {
	Name         string `json:"Name"`
	ProviderType string `json:"ProviderType"`
	URL          string `json:"URL"`
	File         string `json:"File"`
}

// kubevirtRepository runs the real clusterctl on a configuration and
// returns where it resolves the kubevirt infrastructure provider.
func kubevirtRepository(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "clusterctl"), "config", "repositories", "-o", "yaml", "--config", path)
	cmd.Env = append(os.Environ(), "HOME="+dir, "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl config repositories: %v\n%s", err, out)
	}
	var entries []repositoryEntry
	if err := yaml.Unmarshal(out, &entries); err != nil {
		t.Fatalf("reading clusterctl's repositories: %v\n%s", err, out)
	}
	for _, e := range entries {
		if e.Name == "kubevirt" && e.ProviderType == "InfrastructureProvider" {
			return e.URL + e.File
		}
	}
	t.Fatalf("clusterctl lists no kubevirt infrastructure provider:\n%s", out)
	return ""
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestInstallDocProviderEntry checks the clusterctl.yaml entry that
// docs/install.md tells users to add, exactly as written there: with it,
// clusterctl resolves "kubevirt" to this provider's releases; without it,
// to the community provider of the same name.
func TestInstallDocProviderEntry(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	var entry string
	for _, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(m[1], "releases/latest") {
			entry = m[1]
			break
		}
	}
	if entry == "" {
		t.Fatal("docs/install.md has no yaml block with the provider entry")
	}
	const ours = "https://github.com/capkv/cluster-api-provider-kubevirt/releases/latest/infrastructure-components.yaml"
	if got := kubevirtRepository(t, entry); got != ours {
		t.Errorf("with the documented entry, kubevirt resolves to %s, want %s", got, ours)
	}
	if got := kubevirtRepository(t, "{}\n"); !strings.Contains(got, "kubernetes-sigs/cluster-api-provider-kubevirt") {
		t.Errorf("without the entry, kubevirt resolves to %s; docs/install.md says it is the community provider", got)
	}
}

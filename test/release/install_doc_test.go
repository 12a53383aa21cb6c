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

// TestReleaseWritesARepository runs the real clusterctl on the
// clusterctl.yaml make release-manifests writes: the kubevirt provider
// resolves to the repository written beside it, and generate renders the
// default flavor from there, with nothing fetched. An untagged build (a
// VERSION that is no semantic version) is written as the newest release
// series of metadata.yaml.
func TestReleaseWritesARepository(t *testing.T) {
	dir := releaseManifests(t, "VERSION=0123abc-dirty")
	versionDir := filepath.Join(dir, "repository", "infrastructure-kubevirt", releaseVersion)
	for _, f := range []string{"infrastructure-components.yaml", "metadata.yaml", "cluster-template.yaml", "cluster-template-nodeport.yaml", "clusterclass-kubevirt.yaml"} {
		if _, err := os.Stat(filepath.Join(versionDir, f)); err != nil {
			t.Errorf("the written repository lacks %s: %v", f, err)
		}
	}
	// Cluster API's hack/create-local-repository.py (Tilt) reads the
	// provider's clusterctl-settings.json: its next version is the one an
	// untagged build is released as.
	settings, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "clusterctl-settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Name   string `json:"name"`
		Config struct {
			ComponentsFile string `json:"componentsFile"`
			NextVersion    string `json:"nextVersion"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal(settings, &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "infrastructure-kubevirt" || s.Config.ComponentsFile != "infrastructure-components.yaml" || s.Config.NextVersion != releaseVersion {
		t.Errorf("clusterctl-settings.json says %+v, want infrastructure-kubevirt, infrastructure-components.yaml, %s", s, releaseVersion)
	}
	config, err := os.ReadFile(filepath.Join(dir, "clusterctl.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kubevirtRepository(t, string(config)), "file://"+versionDir+"/infrastructure-components.yaml"; got != want {
		t.Errorf("with the written clusterctl.yaml, kubevirt resolves to %s, want %s", got, want)
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "clusterctl"), "generate", "cluster", "blue",
		"--config", filepath.Join(dir, "clusterctl.yaml"), "--infrastructure", "kubevirt:"+releaseVersion,
		"--target-namespace", "tenants", "--kubernetes-version", "v1.34.1", "--worker-machine-count", "2")
	cmd.Env = append(os.Environ(), "HOME="+home, "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clusterctl generate cluster from the written repository: %v\n%s", err, stderr.String())
	}
	// flannel's VXLAN leaves the port an infra cluster's own VXLAN uses
	// (docs/cni.md).
	for _, want := range []string{"kind: KubevirtCluster", "name: blue", "namespace: tenants", "kind: ClusterResourceSet",
		`"Backend": {"Type": "vxlan", "Port": 8473}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the generated cluster lacks %q", want)
		}
	}
}

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

// Package clusterctl drives the real clusterctl (bin/clusterctl, built from
// the pinned hack/tools/clusterctl module) against the test world, as a
// platform engineer drives it: from a clusterctl.yaml whose kubevirt entry
// points at a local repository of this provider's release artifacts
// (make release-manifests), with nothing fetched from the network.
package clusterctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// ProviderLabel is this provider's manifest label: the directory of its
// local repository, and the cluster.x-k8s.io/provider label of everything
// clusterctl installs for it.
const ProviderLabel = "infrastructure-kubevirt"

// Clusterctl runs clusterctl with a configuration and a local repository of
// its own, in a HOME of its own.
type Clusterctl struct {
	// Dir holds HOME, clusterctl.yaml and the repository.
	Dir string
	// Config is the clusterctl.yaml.
	Config string
	// Repository is the local repository root.
	Repository string
	// CAPIVersion is the version of the in-process Cluster API providers.
	CAPIVersion string
	// Binaries map the manager images of other releases (BuildRelease) to
	// their binaries, for the world to run; other images run bin/manager.
	Binaries map[string]string

	config map[string]any
}

// SetVariables sets variables in clusterctl.yaml, as a user sets the
// provider's and the templates' variables there.
func (cc *Clusterctl) SetVariables(vars map[string]string) error {
	for k, v := range vars {
		cc.config[k] = v
	}
	return cc.writeConfig()
}

func (cc *Clusterctl) writeConfig() error {
	data, err := yaml.Marshal(cc.config)
	if err != nil {
		return err
	}
	return os.WriteFile(cc.Config, data, 0o600)
}

// Release is one version of this provider's release artifacts: a directory
// with infrastructure-components.yaml, metadata.yaml and the cluster
// templates, as make release-manifests writes it.
type Release struct {
	Version string
	Dir     string
}

// New writes a local repository with the given releases of this provider
// (the last one is the default version) and of the in-process Cluster API
// providers (their metadata.yaml, which init, move and upgrade read to
// check contracts), and a clusterctl.yaml that points clusterctl there.
func New(dir string, releases ...Release) (*Clusterctl, error) {
	if len(releases) == 0 {
		return nil, errors.New("no release of the provider to put in the repository")
	}
	capi, err := testenv.ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	capiVersion := capi[strings.LastIndex(capi, "@")+1:]
	cc := &Clusterctl{Dir: dir, Config: filepath.Join(dir, "clusterctl.yaml"), Repository: filepath.Join(dir, "repository"), CAPIVersion: capiVersion}
	for _, r := range releases {
		if err := cc.AddRelease(r); err != nil {
			return nil, err
		}
	}
	var providers []map[string]string
	for _, p := range InProcessProviders(capiVersion) {
		versionDir := filepath.Join(cc.Repository, p.Label, capiVersion)
		if err := copyFile(filepath.Join(capi, "metadata.yaml"), filepath.Join(versionDir, "metadata.yaml")); err != nil {
			return nil, err
		}
		// The components are never read: the providers run in-process and
		// are only registered in the inventory.
		providers = append(providers, map[string]string{"name": p.Name, "type": p.Type,
			"url": "file://" + filepath.Join(versionDir, p.Components)})
	}
	latest := releases[len(releases)-1].Version
	providers = append(providers, map[string]string{"name": "kubevirt", "type": "InfrastructureProvider",
		"url": "file://" + filepath.Join(cc.Repository, ProviderLabel, latest, "infrastructure-components.yaml")})
	cc.config = map[string]any{
		"providers": providers,
		// cert-manager runs in the world already: clusterctl must find it
		// and never try to install one (a missing file fails at once).
		"cert-manager": map[string]any{
			"url":                   "file://" + filepath.Join(cc.Repository, "cert-manager", "v0.0.0", "cert-manager.yaml"),
			"externallyProvisioned": true,
			"timeout":               "2m",
		},
		"CLUSTERCTL_DISABLE_VERSIONCHECK": "true",
	}
	if err := cc.writeConfig(); err != nil {
		return nil, err
	}
	return cc, nil
}

// AddRelease puts a release of this provider into the repository.
func (cc *Clusterctl) AddRelease(r Release) error {
	files, err := filepath.Glob(filepath.Join(r.Dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, want := range []string{"infrastructure-components.yaml", "metadata.yaml"} {
		if _, err := os.Stat(filepath.Join(r.Dir, want)); err != nil {
			return fmt.Errorf("release %s in %s has no %s: run make release-manifests", r.Version, r.Dir, want)
		}
	}
	for _, f := range files {
		if err := copyFile(f, filepath.Join(cc.Repository, ProviderLabel, r.Version, filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}

// AddTestFlavors puts flavors that are not released (the e2e suite's
// test/e2e/testdata/templates/cluster-template-*.yaml) into the
// repository's release version, each followed by the CNI's
// ClusterResourceSet as make release-manifests appends it to the released
// ones.
func (cc *Clusterctl) AddTestFlavors(version, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "cluster-template-*.yaml"))
	if err != nil {
		return err
	}
	cni, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "templates", "addons", "cni-flannel.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // the suite's own test flavors
		if err != nil {
			return err
		}
		data = append(append(data, "---\n"...), cni...)
		if err := os.WriteFile(filepath.Join(cc.Repository, ProviderLabel, version, filepath.Base(f)), data, 0o600); err != nil { //nolint:gosec // the test's own repository directory
			return err
		}
	}
	return nil
}

// Run runs clusterctl with args and the configuration, and returns its
// standard output. An error carries the standard error too.
func (cc *Clusterctl) Run(ctx context.Context, args ...string) (string, error) {
	return cc.RunWithVariables(ctx, nil, args...)
}

// RunWithVariables is Run with variables set in clusterctl's environment,
// where they win over clusterctl.yaml, as a user exports them.
func (cc *Clusterctl) RunWithVariables(ctx context.Context, vars map[string]string, args ...string) (string, error) {
	stdout, _, err := cc.run(ctx, vars, args...)
	return stdout, err
}

// run returns clusterctl's standard output and its log (standard error).
func (cc *Clusterctl) run(ctx context.Context, vars map[string]string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "clusterctl"), append(args, "--config", cc.Config)...) //nolint:gosec // the pinned clusterctl
	home := filepath.Join(cc.Dir, "home")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("clusterctl %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from) //nolint:gosec // release artifacts and the module cache
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600) //nolint:gosec // paths of the test's own repository directory
}

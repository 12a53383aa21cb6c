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

// Package testenv starts the test world on a real kube-apiserver and etcd,
// built from the pinned hack/tools/kube module, with every CRD the provider
// and Cluster API need installed: CAPKV's, Cluster API's (core, kubeadm
// bootstrap, kubeadm control plane, read from the module cache), KubeVirt's
// from its install set (bin/kubevirt-install.yaml), and those of CDI and
// Multus from test/crds. It runs the real components beside it as
// processes: kube-scheduler and kube-controller-manager, cert-manager,
// Cluster API's in-cluster IPAM provider, and KubeVirt's and CDI's API
// servers and controllers (one start sequence for both, component.go); and
// the provider's manager in-process (StartManager).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot is the root of this repository.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinDir is where the kube-apiserver, etcd, kube-scheduler and
// kube-controller-manager binaries are: $KUBE_BIN_DIR, else bin/.
func BinDir() string {
	if dir := os.Getenv("KUBE_BIN_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin")
}

var (
	moduleDirs   = map[string]string{}
	moduleDirsMu sync.Mutex
)

// ModuleDir returns the module cache directory of a module the repository
// depends on, at the version the test module's go.mod pins.
func ModuleDir(module string) (string, error) {
	return moduleDirIn(filepath.Join(RepoRoot(), "test"), module)
}

// toolModuleDir is ModuleDir for a module a hack/tools module pins.
func toolModuleDir(tool, module string) (string, error) {
	return moduleDirIn(filepath.Join(RepoRoot(), "hack", "tools", tool), module)
}

func moduleDirIn(from, module string) (string, error) {
	moduleDirsMu.Lock()
	defer moduleDirsMu.Unlock()
	key := from + " " + module
	if dir, ok := moduleDirs[key]; ok {
		return dir, nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module) //nolint:gosec // module names are constants of the test world
	cmd.Dir = from
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not in the module cache; run 'go mod download'", module)
	}
	moduleDirs[key] = dir
	return dir, nil
}

func checkBinaries(dir string, names ...string) error {
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run 'make kube-binaries' (or 'make test', which does)", name, dir)
		}
	}
	return nil
}

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

package clusterctl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// ImageOf is the manager image a release of version is built with.
func ImageOf(version string) string {
	return "ghcr.io/capkv/cluster-api-provider-kubevirt:" + version
}

// BuildRelease builds the release artifacts and the manager binary of an
// earlier commit of this repository, as that commit's make
// release-manifests and make build write them, under version: the source
// comes from git archive (no worktree of the repository is touched) into
// dir/src, the artifacts go to dir/release and the binary to dir/manager.
// The release's image is ImageOf(version); put it in Binaries so that the
// world runs the binary for it.
func BuildRelease(ctx context.Context, commit, version, dir string) (Release, string, error) {
	src, release := filepath.Join(dir, "src"), filepath.Join(dir, "release")
	if err := os.MkdirAll(src, 0o750); err != nil {
		return Release{}, "", err
	}
	if err := exec.CommandContext(ctx, "git", "-C", testenv.RepoRoot(), "cat-file", "-e", commit+"^{commit}").Run(); err != nil { //nolint:gosec // a commit of this repository the test pins
		return Release{}, "", fmt.Errorf("commit %s is not in this clone's git history (a shallow clone? run git fetch --unshallow): %w", commit, err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", testenv.RepoRoot(), "archive", "--format=tar", commit) //nolint:gosec // a commit of this repository the test pins
	var tarball bytes.Buffer
	archive.Stdout = &tarball
	if err := run(archive); err != nil {
		return Release{}, "", err
	}
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", src) //nolint:gosec // the test's own directory
	extract.Stdin = &tarball
	if err := run(extract); err != nil {
		return Release{}, "", err
	}
	// The commit's Makefile may run kustomize through go run; the kustomize
	// this checkout built into bin/ needs no module proxy request.
	manifests := exec.CommandContext(ctx, "make", "--no-print-directory", "release-manifests", //nolint:gosec // our own Makefile
		"RELEASE_DIR="+release, "VERSION="+version, "IMG="+ImageOf(version),
		"KUSTOMIZE="+filepath.Join(testenv.RepoRoot(), "bin", "kustomize"))
	manifests.Dir = src
	if err := run(manifests); err != nil {
		return Release{}, "", err
	}
	binary := filepath.Join(dir, "manager")
	// make build's flags: without -trimpath the build cache keys each
	// package by its directory, a new temporary one every run, and the
	// commit's packages compiled again each time; with them, its
	// dependencies are the ones make build compiled.
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, ".") //nolint:gosec // our own source
	build.Dir = src
	build.Env = append(testenv.BuildEnv(), "CGO_ENABLED=0")
	if err := run(build); err != nil {
		return Release{}, "", err
	}
	return Release{Version: version, Dir: release}, binary, nil
}

func run(cmd *exec.Cmd) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", cmd.String(), err, stderr.String())
	}
	return nil
}

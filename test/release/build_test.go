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
	"archive/tar"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// versionVar is what the Makefile's LDFLAGS, make image and the
// Dockerfile set.
const versionVar = "github.com/capkv/cluster-api-provider-kubevirt/pkg/common/version.Version"

// TestImage runs make release as a release would, which builds the
// manager's image with nothing but Go (make image) and releases the
// clusterctl artifacts with it pinned by digest, and checks the image: an
// OCI index of linux/amd64 and linux/arm64, each image running
// /manager as the non-root user, labelled with the version, commit and
// source; each binary a static ELF for its machine with the version
// compiled in, the amd64 one answering --version with it; the provenance
// naming the index's digest.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	layoutDir := filepath.Join(dir, "image")
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+releaseVersion,
		"IMAGE_DIR="+layoutDir, "RELEASE_DIR="+filepath.Join(dir, "release"))
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = makeEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	index := readIndex(t, layoutDir)
	digest, err := index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := "ghcr.io/capkv/cluster-api-provider-kubevirt@" + digest.String()
	if got, _ := os.ReadFile(layoutDir + ".ref"); strings.TrimSpace(string(got)) != ref {
		t.Errorf("%s.ref says %q, want %q", layoutDir, got, ref)
	}
	components, err := os.ReadFile(filepath.Join(dir, "release", "infrastructure-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if images := deploymentImages(t, objects(t, components)); !slices.Equal(images, []string{ref}) {
		t.Errorf("the released Deployment runs %q, want the image by digest, %s", images, ref)
	}
	checkProvenance(t, layoutDir+".provenance.json", digest)

	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range manifest.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("the index holds %q, want %q", platforms, want)
	}
	revision := gitHead(t)
	for _, tc := range []struct {
		goarch  string
		machine elf.Machine
	}{
		{goarch: "amd64", machine: elf.EM_X86_64},
		{goarch: "arm64", machine: elf.EM_AARCH64},
	} {
		t.Run(tc.goarch, func(t *testing.T) {
			img, err := index.Image(manifest.Manifests[slices.Index(platforms, "linux/"+tc.goarch)].Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS != "linux" || cfg.Architecture != tc.goarch {
				t.Errorf("config platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, tc.goarch)
			}
			if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || len(cfg.Config.Cmd) != 0 {
				t.Errorf("runs %q %q as %q, want /manager as 65532:65532", cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.User)
			}
			for key, want := range map[string]string{
				"org.opencontainers.image.version":  releaseVersion,
				"org.opencontainers.image.revision": revision,
				"org.opencontainers.image.source":   "https://github.com/capkv/cluster-api-provider-kubevirt",
			} {
				if got := cfg.Config.Labels[key]; got != want && (key != "org.opencontainers.image.revision" || got != want+"-dirty") {
					t.Errorf("label %s=%q, want %q", key, got, want)
				}
			}
			files := imageFiles(t, img)
			if !strings.Contains(string(files["etc/passwd"]), ":x:65532:65532:") {
				t.Errorf("/etc/passwd names no user 65532:\n%s", files["etc/passwd"])
			}
			bin := filepath.Join(t.TempDir(), "manager")
			if err := os.WriteFile(bin, files["manager"], 0o755); err != nil {
				t.Fatal(err)
			}
			checkManagerBinary(t, bin, tc.goarch, tc.machine)
			if tc.goarch != runtime.GOARCH {
				return
			}
			out, err := exec.Command(bin, "--version").CombinedOutput()
			if err != nil || !strings.Contains(string(out), releaseVersion) {
				t.Errorf("/manager --version: %v\n%s\nwant %s", err, out, releaseVersion)
			}
		})
	}
}

// checkManagerBinary checks that bin is a static ELF for machine, built
// without cgo and with -trimpath, with the release version compiled in:
// the image has no C library and no dynamic loader.
func checkManagerBinary(t *testing.T, bin, goarch string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Machine != machine || f.Class != elf.ELFCLASS64 || f.OSABI != elf.ELFOSABI_NONE {
		t.Errorf("ELF machine %v, class %v, OS ABI %v; want %v, %v, %v",
			f.Machine, f.Class, f.OSABI, machine, elf.ELFCLASS64, elf.ELFOSABI_NONE)
	}
	for _, p := range f.Progs {
		// PT_INTERP names the dynamic loader; PT_DYNAMIC holds what it
		// would link. A static binary has neither.
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: the binary is dynamically linked", p.Type)
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Path != "github.com/capkv/cluster-api-provider-kubevirt" {
		t.Errorf("main package %s, want the manager's", bi.Path)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{
		"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": goarch, "-trimpath": "true",
	} {
		if settings[key] != want {
			t.Errorf("build setting %s=%q, want %q", key, settings[key], want)
		}
	}
	// -trimpath keeps -ldflags out of the build info: read the variable
	// -X set instead.
	if v, err := stringVar(f, versionVar); err != nil || v != releaseVersion {
		t.Errorf("%s = %q (%v), want %q", versionVar, v, err, releaseVersion)
	}
}

// readIndex reads the one image index of the OCI layout at dir.
func readIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	path, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	top, err := path.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != releaseVersion {
		t.Fatalf("the layout holds %+v, want one index named %s", manifest.Manifests, releaseVersion)
	}
	index, err := top.ImageIndex(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return index
}

// imageFiles reads the regular files of the image's flattened file
// system, by path.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "/")] = data
		}
	}
}

// checkProvenance checks that the provenance statement names the index by
// its digest and the commit it was built from.
func checkProvenance(t *testing.T, path string, index v1.Hash) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" ||
		len(st.Subject) == 0 || st.Subject[0].Digest["sha256"] != index.Hex {
		t.Errorf("provenance %s does not state SLSA provenance of index %s:\n%s", path, index, data)
	}
	if deps := st.Predicate.BuildDefinition.ResolvedDependencies; len(deps) != 1 || deps[0].Digest["gitCommit"] != strings.TrimSuffix(gitHead(t), "-dirty") {
		t.Errorf("provenance does not name commit %s: %+v", gitHead(t), deps)
	}
}

// gitHead is the commit the tests run at.
func gitHead(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// stringVar reads the value of the Go string variable name (its symbol's
// data is a string header: pointer, then length) from a 64-bit Go binary.
func stringVar(f *elf.File, name string) (string, error) {
	syms, err := f.Symbols()
	if err != nil {
		return "", err
	}
	for _, sym := range syms {
		if sym.Name != name {
			continue
		}
		hdr, err := readAddr(f, sym.Value, 16)
		if err != nil {
			return "", err
		}
		data, err := readAddr(f, f.ByteOrder.Uint64(hdr[:8]), f.ByteOrder.Uint64(hdr[8:]))
		return string(data), err
	}
	return "", fmt.Errorf("no symbol %s", name)
}

// readAddr reads n bytes at virtual address addr from the section holding
// them.
func readAddr(f *elf.File, addr, n uint64) ([]byte, error) {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS && s.Addr != 0 && addr >= s.Addr && addr+n <= s.Addr+s.Size {
			buf := make([]byte, n)
			_, err := s.ReadAt(buf, int64(addr-s.Addr))
			return buf, err
		}
	}
	return nil, fmt.Errorf("address %#x is in no section of the file", addr)
}

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
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// versionVar is what the Makefile's LDFLAGS and the Dockerfile set.
const versionVar = "github.com/capkv/cluster-api-provider-kubevirt/pkg/version.Version"

// TestManagerBinary builds the manager as the Dockerfile does (no cgo,
// -trimpath, the version in -ldflags) for each architecture the image is
// published for, and checks that it is a static ELF for that machine: the
// distroless/static base has no C library and no dynamic loader.
func TestManagerBinary(t *testing.T) {
	for _, tc := range []struct {
		goarch  string
		machine elf.Machine
	}{
		{goarch: "amd64", machine: elf.EM_X86_64},
		{goarch: "arm64", machine: elf.EM_AARCH64},
	} {
		t.Run(tc.goarch, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "manager")
			ldflags := "-X " + versionVar + "=" + releaseVersion
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, ".")
			cmd.Dir = testenv.RepoRoot()
			cmd.Env = append(testenv.BuildEnv(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+tc.goarch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build (linux/%s): %v\n%s", tc.goarch, err, out)
			}
			st, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Mode().IsRegular() || st.Size() == 0 {
				t.Fatalf("%s is not a non-empty file: %v, %d bytes", bin, st.Mode(), st.Size())
			}

			f, err := elf.Open(bin)
			if err != nil {
				t.Fatalf("not an ELF file: %v", err)
			}
			defer f.Close()
			if f.Machine != tc.machine || f.Class != elf.ELFCLASS64 || f.OSABI != elf.ELFOSABI_NONE {
				t.Errorf("ELF machine %v, class %v, OS ABI %v; want %v, %v, %v",
					f.Machine, f.Class, f.OSABI, tc.machine, elf.ELFCLASS64, elf.ELFOSABI_NONE)
			}
			for _, p := range f.Progs {
				// PT_INTERP names the dynamic loader; PT_DYNAMIC holds what
				// it would link. A static binary has neither.
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
				"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": tc.goarch, "-trimpath": "true",
			} {
				if settings[key] != want {
					t.Errorf("build setting %s=%q, want %q", key, settings[key], want)
				}
			}
			// -trimpath keeps -ldflags out of the build info: read the
			// variable -X set instead.
			if v, err := stringVar(f, versionVar); err != nil || v != releaseVersion {
				t.Errorf("%s = %q (%v), want %q", versionVar, v, err, releaseVersion)
			}
		})
	}
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

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
	"strconv"
	"strings"
	"testing"
)

// children lists the processes this test process started from the
// repository's binaries.
func children(t *testing.T) []string {
	t.Helper()
	bin := BinDir()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// Field 4 of /proc/<pid>/stat is the parent pid; the command name
		// in field 2 may hold spaces, so split after its closing parenthesis.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != me {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		if strings.HasPrefix(string(cmdline), bin) {
			out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// TestStopLeavesNoProcess starts the API server, etcd, scheduler and
// controller-manager, stops them, and checks none is left running.
func TestStopLeavesNoProcess(t *testing.T) {
	env, err := Start(Options{WithKubeComponents: true, WithoutKubeVirtCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	running := children(t)
	if len(running) < 2 {
		t.Fatalf("expected the scheduler and controller-manager among the children, found %d: %v", len(running), running)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := children(t); len(left) > 0 {
		t.Fatalf("processes left after Stop: %v", left)
	}
}

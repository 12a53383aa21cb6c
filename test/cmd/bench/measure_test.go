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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCPUByProcessSumsTheTreeByName reads a /proc with a tree below pid 10
// (two etcd, a kube-apiserver, a grandchild) and processes outside it.
func TestCPUByProcessSumsTheTreeByName(t *testing.T) {
	root := t.TempDir()
	// pid, name, ppid, utime, stime (ticks)
	for _, p := range []struct {
		pid, ppid    int
		name         string
		utime, stime int
	}{
		{10, 1, "bench", 300, 100},
		{11, 10, "etcd", 50, 50},
		{12, 10, "etcd", 100, 0},
		{13, 10, "kube-apiserver", 1000, 250},
		{14, 13, "virt (ctl) x", 20, 5}, // a name with spaces and parentheses
		{20, 1, "etcd", 999, 999},       // not ours
		{21, 20, "manager", 999, 999},
	} {
		dir := filepath.Join(root, fmt.Sprint(p.pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 4194304 100 0 0 0 %d %d 0 0 20 0 8 0 100 1000 10", p.pid, p.name, p.ppid, p.utime, p.stime)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := cpuByProcess(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"bench": 4, "etcd": 2, "kube-apiserver": 12.5, "virt (ctl) x": 0.25}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cpuByProcess = %v, want %v", got, want)
	}
	since := cpuSince(map[string]float64{"bench": 1.04, "etcd": 2}, map[string]float64{"bench": 4, "etcd": 2, "manager": 3.33})
	if wantSince := map[string]float64{"bench": 3, "etcd": 0, "manager": 3.3}; !reflect.DeepEqual(since, wantSince) {
		t.Errorf("cpuSince = %v, want %v", since, wantSince)
	}
}

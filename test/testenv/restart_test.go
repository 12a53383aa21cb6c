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
	"time"
)

// TestComponentStartedAgainAfterExit checks that a component that exits
// on its own is started again, with its exits reported, and that one
// stopped by the environment is not.
func TestComponentStartedAgainAfterExit(t *testing.T) {
	defer func(b time.Duration) { restartBackoff = b }(restartBackoff)
	restartBackoff = 10 * time.Millisecond
	// stopProcesses removes the components' directory: the runs file is
	// kept apart.
	runs := filepath.Join(t.TempDir(), "runs")
	e := &Env{componentsDir: t.TempDir()}
	// It exits at once on its first two runs and stays up on the third.
	script := `echo run >> ` + runs + `; [ $(wc -l < ` + runs + `) -ge 3 ] && exec sleep 60; exit 3`
	if err := e.startProcessEnv("/bin", "sh", "flaky", []string{"-c", script}, nil); err != nil {
		t.Fatal(err)
	}
	count := func() int { return runCount(t, runs) }
	deadline := time.Now().Add(10 * time.Second)
	for count() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n != 3 {
		t.Fatalf("the component ran %d times, want 3: started again after each of its two exits", n)
	}
	exits := e.ComponentExits()
	if len(exits) != 2 || !strings.Contains(exits[0], "flaky exited") || !strings.Contains(exits[0], "exit status 3") {
		t.Fatalf("ComponentExits() = %q, want the two exits of flaky with their status", exits)
	}
	if err := e.stopProcesses(); err != nil {
		t.Fatal(err)
	}
	// A stop is no exit to recover from: nothing starts it again.
	time.Sleep(20 * restartBackoff)
	if n := count(); n != 3 {
		t.Fatalf("the component ran %d times after its stop, want still 3", n)
	}
}

// TestComponentStoppedDuringBackoff checks that a stop ends the wait of a
// component that exited, at once and without another run.
func TestComponentStoppedDuringBackoff(t *testing.T) {
	defer func(b time.Duration) { restartBackoff = b }(restartBackoff)
	restartBackoff = time.Hour
	runs := filepath.Join(t.TempDir(), "runs")
	e := &Env{componentsDir: t.TempDir()}
	if err := e.startProcessEnv("/bin", "sh", "exits", []string{"-c", "echo run >> " + runs + "; exit 1"}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(e.ComponentExits()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if exits := e.ComponentExits(); len(exits) != 1 {
		t.Fatalf("ComponentExits() = %q, want the one exit", exits)
	}
	start := time.Now()
	if err := e.stopProcesses(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("stopping a component waiting for its restart took %v", d)
	}
	if n := runCount(t, runs); n != 1 {
		t.Fatalf("the component ran %d times, want 1", n)
	}
}

// runCount counts the runs a test component wrote to path.
func runCount(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(data), "run")
}

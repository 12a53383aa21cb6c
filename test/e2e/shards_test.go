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

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// shardEnv names the shard a re-executed test binary runs.
const shardEnv = "E2E_SHARD"

// firstShardFiles are the spec files of the first shard; the second runs
// every other file. Each shard is its own process with its own world and
// clusterctl init, so the two run side by side: the specs mostly wait on
// the world's controllers, and one world leaves the second core idle. The
// split keeps the two about even (the demo and ClusterClass specs are the
// longest; clusterctl's flavors take as long as both) and keeps the specs
// that need a world to themselves apart: the demo fails an infra node, the
// ClusterClass spec counts the simulator's imports.
var firstShardFiles = []string{"demo_test.go", "topology_test.go", "ipam_test.go", "machinepool_test.go"}

// shardConfig narrows the suite to the shard this process runs. It tells
// whether the specs run here: false when this process should start the
// shards instead. The shards run only with E2E_SHARDS=2, and not against a
// real cluster (E2E_KUBECONFIG) nor in a run that picks specs itself
// (-ginkgo.focus, ...). They are off by default: the second world costs
// CPU, and on 2 cores make test is bound by CPU, not by waiting (measured
// 2026-11-27: e2e 1553 s instead of 1848 s, but test/integration beside
// it 2170 s instead of 1482 s, make test 2837 s in all).
func shardConfig(cfg *types.SuiteConfig) bool {
	switch os.Getenv(shardEnv) {
	case "1":
		cfg.FocusFiles = append(cfg.FocusFiles, firstShardFiles...)
		return true
	case "2":
		cfg.SkipFiles = append(cfg.SkipFiles, firstShardFiles...)
		return true
	}
	picked := len(cfg.FocusStrings) > 0 || len(cfg.SkipStrings) > 0 || len(cfg.FocusFiles) > 0 ||
		len(cfg.SkipFiles) > 0 || cfg.LabelFilter != ""
	return os.Getenv("E2E_KUBECONFIG") != "" || os.Getenv("E2E_SHARDS") != "2" || picked
}

// runShards runs this test binary once per shard, side by side, each
// writing to out/e2e-shard-N.log (to follow while it runs), and reports each
// shard's output when it ends. The shards stop a minute before this
// process would, so that their own timeout reports what hung.
func runShards(t *testing.T) {
	args := []string{}
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.timeout") && !strings.HasPrefix(a, "-test.testlogfile") {
			args = append(args, a)
		}
	}
	if deadline, ok := t.Deadline(); ok {
		args = append(args, fmt.Sprintf("-test.timeout=%s", time.Until(deadline)-time.Minute))
	}
	var wg sync.WaitGroup
	for _, shard := range []string{"1", "2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logPath := filepath.Join(testenv.RepoRoot(), "out", "e2e-shard-"+shard+".log")
			out, err := os.Create(logPath)
			if err != nil {
				t.Errorf("e2e shard %s: %v", shard, err)
				return
			}
			defer out.Close()
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), shardEnv+"="+shard)
			cmd.Stdout, cmd.Stderr = out, out
			// A shard dies with this process, and its world with it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			start := time.Now()
			err = cmd.Run()
			wall := time.Since(start)
			report, _ := os.ReadFile(logPath)
			t.Logf("e2e shard %s (%s) took %s, output in %s:\n%s", shard, shardFiles(shard), wall.Round(time.Second), logPath, report)
			if err != nil {
				t.Errorf("e2e shard %s: %v", shard, err)
			}
			recordTiming(t, "test/e2e shard "+shard, wall, cmd.ProcessState, err == nil)
		}()
	}
	wg.Wait()
}

// shardFiles describes a shard's spec files.
func shardFiles(shard string) string {
	if shard == "1" {
		return strings.Join(firstShardFiles, ", ")
	}
	return "every other spec file"
}

// recordTiming adds a shard's wall and CPU seconds (its world's processes
// included) to the timing table of make test (hack/timings.sh), when
// TIMINGS_DIR names it.
func recordTiming(t *testing.T, name string, wall time.Duration, state *os.ProcessState, ok bool) {
	dir := os.Getenv("TIMINGS_DIR")
	if dir == "" || state == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "FAIL"
	}
	cpu := state.UserTime() + state.SystemTime()
	line := fmt.Sprintf("shard\t%s\t%.0f\t%.0f\t%s\n", name, wall.Seconds(), cpu.Seconds(), result)
	f, err := os.OpenFile(filepath.Join(dir, "shard.tsv"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("recording the shard's timing: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line)
}

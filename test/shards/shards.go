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

// Package shards runs a test binary again as several processes side by
// side, each with its own world and its own slice of the tests: the long
// suites mostly wait on their world's controllers, so two worlds finish
// sooner than one (docs/testing.md, "Tests at once").
package shards

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Shard is one process of the suite.
type Shard struct {
	// Name tells the shard apart in its log's name and the timing table.
	Name string
	// Env is added to the process's environment; it tells the process
	// which shard it runs.
	Env []string
	// Args are added to the test binary's own arguments (a -test.run).
	Args []string
}

// Result is how a shard ended.
type Result struct {
	Shard
	// Log is the file with the shard's output.
	Log string
	// Output is the shard's output.
	Output []byte
	// Wall is how long it ran.
	Wall time.Duration
	// Err is why it failed, nil when it passed.
	Err error
}

// Run runs this test binary once per shard, side by side, each writing to
// out/<suite>-shard-<name>.log (to follow while it runs), and returns how
// each ended. The shards stop a minute before deadline (when set), so
// that their own timeout reports what hung. Each shard's wall and CPU
// seconds, its world's processes included, go to the timing table of make
// test when TIMINGS_DIR names it.
func Run(suite string, deadline time.Time, shards []Shard) []Result {
	var base []string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.timeout") && !strings.HasPrefix(a, "-test.testlogfile") {
			base = append(base, a)
		}
	}
	if !deadline.IsZero() {
		base = append(base, fmt.Sprintf("-test.timeout=%s", time.Until(deadline)-time.Minute))
	}
	results := make([]Result, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { results[i] = run(suite, s, append(append([]string{}, base...), s.Args...)) })
	}
	wg.Wait()
	return results
}

func run(suite string, s Shard, args []string) Result {
	r := Result{Shard: s, Log: filepath.Join(testenv.RepoRoot(), "out", suite+"-shard-"+s.Name+".log")}
	if err := os.MkdirAll(filepath.Dir(r.Log), 0o750); err != nil {
		r.Err = err
		return r
	}
	out, err := os.Create(r.Log)
	if err != nil {
		r.Err = err
		return r
	}
	defer out.Close()
	cmd := exec.Command(os.Args[0], args...) //nolint:gosec // this test binary, again
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	// A shard dies with this process, and its world with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	r.Err = cmd.Run()
	r.Wall = time.Since(start)
	r.Output, _ = os.ReadFile(r.Log)
	recordTiming("test/"+suite+" shard "+s.Name, r.Wall, cmd.ProcessState, r.Err == nil)
	return r
}

// recordTiming adds a shard's line to TIMINGS_DIR/shard.tsv
// (hack/timings.sh), with the second it started at counted from
// TIMINGS_START; a timing that cannot be written is left out.
func recordTiming(name string, wall time.Duration, state *os.ProcessState, ok bool) {
	dir := os.Getenv("TIMINGS_DIR")
	if dir == "" || state == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "FAIL"
	}
	cpu := state.UserTime() + state.SystemTime()
	f, err := os.OpenFile(filepath.Join(dir, "shard.tsv"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644) //nolint:gosec // make test's timing directory
	if err != nil {
		return
	}
	defer f.Close()
	started := ""
	if origin, err := strconv.ParseInt(os.Getenv("TIMINGS_START"), 10, 64); err == nil {
		started = strconv.FormatInt(time.Now().Add(-wall).Unix()-origin, 10)
	}
	_, _ = fmt.Fprintf(f, "shard\t%s\t%.0f\t%.0f\t%s\t%s\n", name, wall.Seconds(), cpu.Seconds(), result, started)
}

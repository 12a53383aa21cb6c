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

package integration

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capkv/cluster-api-provider-kubevirt/test/shards"
)

// shardEnv names the shard a re-executed test binary runs;
// INTEGRATION_SHARDS=1 runs the whole package in one process.
const (
	shardEnv  = "INTEGRATION_SHARD"
	shardsEnv = "INTEGRATION_SHARDS"
)

// firstShard matches the tests of the first shard; the second runs every
// other test. Each shard is its own process with its own world, so the
// two run side by side and each keeps its tests one at a time, as the
// tests that count the world's writes or the simulator's imports need.
// The split keeps the two about even: the golden-image tests, the chaos
// test, virt-api down, the two tests of the external infra cluster (which
// share its world) and the MachinePool's machines here, the fifty
// machines and everything else there. On 2026-11-29 the first shard took
// 566 s and the second 608 s; the chaos and golden-image tests then lost
// about 40 s each, and the MachinePool test (50 s) moved here.
const firstShard = `^(TestGoldenImage.*|TestAdminProvidedImages|TestPerVMImportAndDataDisks|TestCrossNamespaceCloneNeedsRBAC|` +
	`TestDataImportCronKeepsTheGoldenImageFresh|TestMachinePoolClonesOneGoldenVolume|TestChaosLeaderKills|TestExternalInfraCluster|` +
	`TestInfraClusterOutage|TestVirtAPIDown|TestExternalEvictionFallsBackWhenMigrationFails|TestInPlaceUpdate.*|TestMachinePoolMachines)$`

// shardTests tells whether this process should start the shards instead
// of running tests: not in a shard (runShards gives each its -test.run or
// -test.skip), not with INTEGRATION_SHARDS=1, nor in a run that picks its
// tests itself (-run, -skip, as the inner loop does).
func shardTests() (startShards bool) {
	if !flag.Parsed() {
		flag.Parse()
	}
	switch os.Getenv(shardEnv) {
	case "1", "2":
		return false
	}
	picked := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.run" || f.Name == "test.skip" || f.Name == "test.list" {
			picked = true
		}
	})
	return os.Getenv(shardsEnv) != "1" && !picked
}

// runShards runs the package as two shards (shards.Run), prints each
// shard's output, and returns the exit code: 1 when either failed.
func runShards() int {
	var deadline time.Time
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			deadline = time.Now().Add(d)
		}
	}
	code := 0
	for _, r := range shards.Run("integration", deadline, []shards.Shard{
		{Name: "1", Env: []string{shardEnv + "=1"}, Args: []string{"-test.v=true", "-test.run=" + firstShard}},
		{Name: "2", Env: []string{shardEnv + "=2"}, Args: []string{"-test.v=true", "-test.skip=" + firstShard}},
	}) {
		if r.Err != nil {
			// CI shows the head and tail of a long output: the whole
			// verbose output would hide the failure in the elided middle.
			fmt.Printf("=== integration shard %s failed after %s: %v; whole output in %s, its failed tests and end:\n%s\n",
				r.Name, r.Wall.Round(time.Second), r.Err, r.Log, failedTests(string(r.Output)))
			code = 1
			continue
		}
		// The full output is in the log; each test's line with its
		// duration is what a passing run needs to show.
		fmt.Printf("=== integration shard %s passed in %s, output in %s:\n%s", r.Name, r.Wall.Round(time.Second), r.Log, testLines(r.Output))
	}
	return code
}

// testLines keeps the "--- PASS: TestX (12.34s)" lines of a verbose test
// output.
func testLines(output []byte) string {
	var b strings.Builder
	for line := range strings.Lines(string(output)) {
		if strings.HasPrefix(line, "--- ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// failedTests keeps, of a verbose test output, the sections of the
// top-level tests that failed (from their "=== RUN" to the next test's)
// and the last section, which holds the package's result or a timeout's
// panic; an output without tests (a build error) is kept whole.
func failedTests(output string) string {
	var sections []string
	var b strings.Builder
	for line := range strings.Lines(output) {
		if strings.HasPrefix(line, "=== RUN   ") && !strings.Contains(line, "/") && b.Len() > 0 {
			sections = append(sections, b.String())
			b.Reset()
		}
		b.WriteString(line)
	}
	sections = append(sections, b.String())
	var kept strings.Builder
	for _, section := range sections[:len(sections)-1] {
		if strings.Contains(section, "--- FAIL: ") {
			kept.WriteString(section)
		}
	}
	return kept.String() + sections[len(sections)-1]
}

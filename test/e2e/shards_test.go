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
	"os"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/capkv/cluster-api-provider-kubevirt/test/shards"
)

// shardEnv names the shard a re-executed test binary runs.
const shardEnv = "E2E_SHARD"

// firstShardFiles are the spec files of the first shard; the second runs
// every other file. Each shard is its own process with its own world and
// clusterctl init, so the two run side by side: the specs mostly wait on
// the world's controllers, and one world leaves the second core idle. The
// split keeps the two about even (the reaper, reaper_test.go, took most
// from the second, whose flavor clusters each waited for its deletion)
// and keeps the demo, which fails an infra node, in the first; the slow
// import, which mostly waits, went to the first when the second was the
// longer by about twice its 80 s.
// Of Cluster API's specs, the quick starts, deletion, upgrade, scale, KCP
// adoption and ClusterClass rollout run in the first, the worker specs and
// ClusterClass changes in the second.
var firstShardFiles = []string{"demo_test.go", "inplace_test.go", "clusterapi_test.go", "clusterapi_rollout_test.go", "slowimport_test.go"}

// shardConfig narrows the suite to the shard this process runs. It tells
// whether the specs run here: false when this process should start the
// shards instead. The suite runs as two shards unless E2E_SHARDS=1, and
// never against a real cluster (E2E_KUBECONFIG) nor in a run that picks
// specs itself (-ginkgo.focus, ...). The second world costs CPU: while
// make test was bound by CPU, the shards only moved time from the e2e
// suite to the integration suite beside it; with the conversion webhooks'
// CPU gone, both cores had a third of their time idle (docs/testing.md).
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
	return os.Getenv("E2E_KUBECONFIG") != "" || os.Getenv("E2E_SHARDS") == "1" || picked
}

// runShards runs this test binary once per shard, side by side
// (shards.Run), and reports how each ended: a passing shard its specs'
// durations, a failing one only the specs that failed and Ginkgo's
// summary. CI shows the head and tail of a long output, so the whole
// verbose output of two shards would hide the failure in the elided
// middle; the whole output stays in the shard's log.
func runShards(t *testing.T) {
	deadline, _ := t.Deadline()
	for _, r := range shards.Run("e2e", deadline, []shards.Shard{
		{Name: "1", Env: []string{shardEnv + "=1"}, Args: []string{"-ginkgo.v", "-ginkgo.no-color"}},
		{Name: "2", Env: []string{shardEnv + "=2"}, Args: []string{"-ginkgo.v", "-ginkgo.no-color"}},
	}) {
		if r.Err != nil {
			t.Errorf("e2e shard %s (%s) failed after %s: %v; whole output in %s, its failures:\n%s",
				r.Name, shardFiles(r.Name), r.Wall.Round(time.Second), r.Err, r.Log, failedSpecs(string(r.Output)))
			continue
		}
		t.Logf("e2e shard %s (%s) passed in %s, output in %s:\n%s",
			r.Name, shardFiles(r.Name), r.Wall.Round(time.Second), r.Log, specDurations(string(r.Output)))
	}
}

// specSeparator is the line Ginkgo's verbose output puts between specs.
const specSeparator = "------------------------------"

// specBlocks splits a verbose, uncoloured Ginkgo output into its blocks:
// one per spec, the suite nodes, and what follows the last spec.
func specBlocks(output string) []string {
	var blocks []string
	var b strings.Builder
	for line := range strings.Lines(output) {
		if strings.TrimSpace(line) == specSeparator {
			blocks = append(blocks, b.String())
			b.Reset()
			continue
		}
		b.WriteString(line)
	}
	return append(blocks, b.String())
}

// failedSpecs keeps, of a Ginkgo output, the random seed, the blocks that
// did not pass (a failure, panic, timeout or interrupt, the suite nodes'
// included) and the last block, which holds Ginkgo's summary; an output
// without separators (a build or flag error) is kept whole.
func failedSpecs(output string) string {
	blocks := specBlocks(output)
	if len(blocks) == 1 {
		return output
	}
	var b strings.Builder
	// The seed gives the order the specs ran in, to run them so again
	// (-ginkgo.seed).
	for line := range strings.Lines(blocks[0]) {
		if strings.HasPrefix(line, "Random Seed:") {
			b.WriteString(line)
		}
	}
	for _, block := range blocks[:len(blocks)-1] {
		for _, mark := range []string{"[FAILED]", "[PANICKED]", "[TIMEDOUT]", "[INTERRUPTED]"} {
			if strings.Contains(block, mark) {
				b.WriteString(block + specSeparator + "\n")
				break
			}
		}
	}
	return b.String() + blocks[len(blocks)-1]
}

// specDurations keeps, of a verbose Ginkgo output, each spec's result
// and duration with its name (the first line of its block), the suite
// nodes' results and the line with the suite's total.
func specDurations(output string) string {
	var b strings.Builder
	for _, block := range specBlocks(output) {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		for _, line := range lines {
			switch {
			case strings.HasPrefix(line, "• "):
				b.WriteString(strings.TrimPrefix(line, "• ") + " " + lines[0] + "\n")
			case strings.Contains(line, "] PASSED ["), strings.HasPrefix(line, "Ran "):
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// shardFiles describes a shard's spec files.
func shardFiles(shard string) string {
	if shard == "1" {
		return strings.Join(firstShardFiles, ", ")
	}
	return "every other spec file"
}

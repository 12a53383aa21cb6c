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
// split keeps the two about even (the demo and ClusterClass specs are the
// longest; clusterctl's flavors take as long as both) and keeps the specs
// that need a world to themselves apart: the demo fails an infra node, the
// ClusterClass spec counts the simulator's imports.
var firstShardFiles = []string{"demo_test.go", "topology_test.go", "ipam_test.go", "machinepool_test.go"}

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
// (shards.Run), and reports each shard's output when it ends.
func runShards(t *testing.T) {
	deadline, _ := t.Deadline()
	for _, r := range shards.Run("e2e", deadline, []shards.Shard{
		{Name: "1", Env: []string{shardEnv + "=1"}, Args: []string{"-ginkgo.v"}},
		{Name: "2", Env: []string{shardEnv + "=2"}, Args: []string{"-ginkgo.v"}},
	}) {
		t.Logf("e2e shard %s (%s) took %s, output in %s:\n%s", r.Name, shardFiles(r.Name), r.Wall.Round(time.Second), r.Log, r.Output)
		if r.Err != nil {
			t.Errorf("e2e shard %s: %v", r.Name, r.Err)
		}
	}
}

// shardFiles describes a shard's spec files.
func shardFiles(shard string) string {
	if shard == "1" {
		return strings.Join(firstShardFiles, ", ")
	}
	return "every other spec file"
}

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
	"strings"
	"testing"
)

// shardOutput is a verbose, uncoloured Ginkgo output as a shard writes
// it: a suite node, a passing spec, skipped specs, a failing spec and the
// summary.
const shardOutput = `Running Suite: CAPKV end to end - /w/test/e2e
=============================================
Random Seed: 1795805633

Will run 3 of 5 specs
------------------------------
[BeforeSuite] 
/w/test/e2e/suite_test.go:70
[BeforeSuite] PASSED [50.946 seconds]
------------------------------
The demo cluster gets ready machines
/w/test/e2e/demo_test.go:88
  STEP: waiting @ 11/27/26 18:58:06.08
• [74.057 seconds]
------------------------------
SS
------------------------------
clusterctl describe shows why a machine waits
/w/test/e2e/clusterctl_test.go:236
  [FAILED] in [It] - /w/test/e2e/clusterctl_test.go:245 @ 11/27/26 19:01:00
• [FAILED] [300.001 seconds]
clusterctl describe [It] shows why a machine waits
/w/test/e2e/clusterctl_test.go:236

  [FAILED] Timed out after 300.000s.
  Expected the reason BadImage
------------------------------

[AfterSuite] 
/w/test/e2e/suite_test.go:103
[AfterSuite] PASSED [9.375 seconds]
------------------------------

Summarizing 1 Failure:
  [FAIL] clusterctl describe [It] shows why a machine waits
  /w/test/e2e/clusterctl_test.go:245

Ran 3 of 5 Specs in 425.003 seconds
FAIL! -- 2 Passed | 1 Failed | 0 Pending | 2 Skipped
`

func TestFailedSpecsKeepsOnlyFailuresAndSummary(t *testing.T) {
	got := failedSpecs(shardOutput)
	for _, want := range []string{"Random Seed: 1795805633", "Expected the reason BadImage", "Summarizing 1 Failure:", "FAIL! -- 2 Passed"} {
		if !strings.Contains(got, want) {
			t.Errorf("failedSpecs lost %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"The demo cluster", "[BeforeSuite] PASSED", "Will run 3 of 5"} {
		if strings.Contains(got, gone) {
			t.Errorf("failedSpecs kept %q:\n%s", gone, got)
		}
	}
}

func TestFailedSpecsKeepsAnOutputWithoutSpecsWhole(t *testing.T) {
	const buildError = "flag provided but not defined: -ginkgo.bogus\nFAIL\n"
	if got := failedSpecs(buildError); got != buildError {
		t.Errorf("failedSpecs(%q) = %q, want it whole", buildError, got)
	}
}

func TestSpecDurationsListsEachSpecWithItsTime(t *testing.T) {
	want := "[BeforeSuite] PASSED [50.946 seconds]\n" +
		"[74.057 seconds] The demo cluster gets ready machines\n" +
		"[FAILED] [300.001 seconds] clusterctl describe shows why a machine waits\n" +
		"[AfterSuite] PASSED [9.375 seconds]\n" +
		"Ran 3 of 5 Specs in 425.003 seconds\n"
	if got := specDurations(shardOutput); got != want {
		t.Errorf("specDurations:\n%s\nwant:\n%s", got, want)
	}
}

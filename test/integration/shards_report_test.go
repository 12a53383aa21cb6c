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
	"strings"
	"testing"
)

func TestFailedTestsKeepsTheFailedTestsAndTheEnd(t *testing.T) {
	output := "=== RUN   TestA\n    a_test.go:10: fine\n--- PASS: TestA (1.00s)\n" +
		"=== RUN   TestB\n=== RUN   TestB/sub\n    b_test.go:20: VLAN 100 still taken\n" +
		"    --- FAIL: TestB/sub (2.00s)\n--- FAIL: TestB (2.00s)\n" +
		"=== RUN   TestC\n--- PASS: TestC (3.00s)\nFAIL\n"
	got := failedTests(output)
	for _, want := range []string{"VLAN 100 still taken", "--- FAIL: TestB (2.00s)", "--- PASS: TestC", "FAIL\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("failedTests lost %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestA") {
		t.Errorf("failedTests kept the passing TestA:\n%s", got)
	}
}

func TestFailedTestsKeepsAnOutputWithoutTestsWhole(t *testing.T) {
	const buildError = "# integration\n./x_test.go:1: undefined: y\nFAIL\n"
	if got := failedTests(buildError); got != buildError {
		t.Errorf("failedTests(%q) = %q, want it whole", buildError, got)
	}
}

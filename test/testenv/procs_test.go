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
	"testing"
	"time"
)

// TestParallelTestsRunSideBySide: two parallel subtests each wait for the
// other to start, which one processor's default of one test at a time
// would never let happen.
func TestParallelTestsRunSideBySide(t *testing.T) {
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	for i := range started {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			close(started[i])
			select {
			case <-started[1-i]:
			case <-time.After(10 * time.Second):
				t.Fatal("the other parallel test did not start: parallel tests run one at a time")
			}
		})
	}
}

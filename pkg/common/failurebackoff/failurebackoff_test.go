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

package failurebackoff

import (
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func TestCap(t *testing.T) {
	// The shape of Cluster API's limiter: a 1 s floor, then 5 ms doubling,
	// up to 1000 s.
	inner := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 1000*time.Second)
	limiter := Cap[string](inner, 2*time.Minute)
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, time.Second},
		{1, 2 * time.Second},
		{6, 64 * time.Second},
		{7, 2 * time.Minute},
		{30, 2 * time.Minute},
	} {
		limiter.Forget("a")
		for range tc.failures {
			limiter.When("a")
		}
		if got := limiter.When("a"); got != tc.want {
			t.Errorf("after %d failures: wait %v, want %v", tc.failures, got, tc.want)
		}
		if got := limiter.NumRequeues("a"); got != tc.failures+1 {
			t.Errorf("after %d failures: NumRequeues %d, want %d (counted by the wrapped limiter)", tc.failures, got, tc.failures+1)
		}
	}
	limiter.Forget("a")
	if got := inner.NumRequeues("a"); got != 0 {
		t.Errorf("Forget reached the wrapped limiter with %d requeues left", got)
	}
	if got := limiter.When("b"); got != time.Second {
		t.Errorf("another item's first wait: %v, want the wrapped limiter's 1 s", got)
	}
}

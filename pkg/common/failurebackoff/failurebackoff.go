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

// Package failurebackoff caps how long a controller waits before it
// retries an object whose reconcile failed.
//
// A controller's rate limiter cannot carry the cap: Cluster API's
// controller builder (util/controller/builder.go, with its
// ReconcilerRateLimiting gate, on by default) replaces any RateLimiter a
// provider passes with its own, which waits 1 s plus 5 ms doubling per
// failure, up to 1000 s. The builder leaves the queue alone, so the cap
// goes into the queue, over whatever rate limiter the controller ends up
// with: that limiter keeps its floor and its forgetting on success, and
// the wait never passes the cap.
package failurebackoff

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// NewQueue is a controller's NewQueue option: the queue controller-runtime
// builds without its priority queue (which the manager turns off), over the
// controller's rate limiter capped at most, within an overall 10 retries a
// second (burst 100), as controller-runtime's default limiter allows.
func NewQueue[T comparable](most time.Duration) func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(Cap(limiter, most),
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name})
	}
}

// Cap returns limiter with every wait cut to at most most, within an
// overall 10 retries a second (burst 100).
func Cap[T comparable](limiter workqueue.TypedRateLimiter[T], most time.Duration) workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		capped[T]{TypedRateLimiter: limiter, most: most},
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// capped is a rate limiter whose waits are those of the one it wraps, cut
// to at most most; it counts and forgets through the wrapped one.
type capped[T comparable] struct {
	workqueue.TypedRateLimiter[T]
	most time.Duration
}

// When is the wrapped limiter's wait for item, at most c.most.
func (c capped[T]) When(item T) time.Duration {
	return min(c.TypedRateLimiter.When(item), c.most)
}

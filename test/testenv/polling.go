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
	"time"

	"github.com/onsi/gomega"
)

// DefaultPolling is how often Eventually and Consistently poll in every
// test package with a world, unless an assertion sets its own. Gomega's
// default of 10 ms has each waiting assertion send its API server a
// hundred requests a second: at 100 ms the world package used 129 CPU s
// instead of 166 (docs/testing.md, "Time budget"), and a state the tests
// wait for lasts far longer than 100 ms.
const DefaultPolling = 100 * time.Millisecond

// Every test package that starts a world imports this one, so the default
// holds for each of them, their shards included, before any test runs.
func init() {
	gomega.SetDefaultEventuallyPollingInterval(DefaultPolling)
	gomega.SetDefaultConsistentlyPollingInterval(DefaultPolling)
}

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
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// ProcsEnv is the variable that sets how many processors each Go process of
// a test run uses. Unless it is set, a test binary runs on one, and so does
// every process it starts: API servers, etcd, KubeVirt's and CDI's
// components, clusterctl (docs/testing.md, "One processor per process").
// The provider a world runs as a pod gets the pod's environment alone.
//
// A world is a dozen Go processes that mostly wait. With two processors
// each, the runtime of every one of them spins looking for work whenever a
// goroutine wakes, and gives idle processors to its garbage collector's
// mark workers: CPU the other processes need. With one, the fifty-machine
// test used 139 CPU s instead of 182 in the same wall time. A pod whose CPU
// limit is one core runs so too (the Go runtime follows the cgroup limit).
const ProcsEnv = "GOMAXPROCS"

func init() {
	if !testing.Testing() || os.Getenv(ProcsEnv) != "" {
		return
	}
	runtime.GOMAXPROCS(1)
	_ = os.Setenv(ProcsEnv, "1")
}

// BuildEnv is the environment for a go build that a test runs: this
// process's, without the one-processor setting, so that the compiler uses
// every core.
func BuildEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, ProcsEnv+"=")
	})
}

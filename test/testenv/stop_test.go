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
	"errors"
	"fmt"
	"syscall"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

func TestWithoutAPIServerKill(t *testing.T) {
	timeout := errors.New("timeout waiting for process kube-apiserver to stop")
	exited := fmt.Errorf("unable to kill process /bin/kube-apiserver: %w", syscall.ESRCH)
	etcd := errors.New("timeout waiting for process etcd to stop")
	for _, tc := range []struct {
		name string
		in   error
		want string
	}{
		{"nothing", nil, ""},
		{"the API server killed after the timeout", kerrors.NewAggregate([]error{timeout}), ""},
		{"the API server exited as the timeout fired", kerrors.NewAggregate([]error{exited}), ""},
		{"etcd's timeout stays", kerrors.NewAggregate([]error{timeout, etcd}), etcd.Error()},
		{"an error not from envtest's aggregate stays", timeout, timeout.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := withoutAPIServerKill(tc.in); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("withoutAPIServerKill(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

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

package sim

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

func TestCPUTopology(t *testing.T) {
	tests := []struct {
		vcpus    uint32
		topology instancetypev1beta1.PreferredCPUTopology
		want     kubevirtv1.CPU
	}{
		{4, "", kubevirtv1.CPU{Sockets: 4, Cores: 1, Threads: 1}},
		{4, instancetypev1beta1.Sockets, kubevirtv1.CPU{Sockets: 4, Cores: 1, Threads: 1}},
		{4, instancetypev1beta1.DeprecatedPreferCores, kubevirtv1.CPU{Sockets: 1, Cores: 4, Threads: 1}},
		{2, instancetypev1beta1.Threads, kubevirtv1.CPU{Sockets: 1, Cores: 1, Threads: 2}},
		{8, instancetypev1beta1.Spread, kubevirtv1.CPU{Sockets: 4, Cores: 2, Threads: 1}},
		{3, instancetypev1beta1.Spread, kubevirtv1.CPU{Sockets: 1, Cores: 3, Threads: 1}},
		{2, instancetypev1beta1.Any, kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1}},
	}
	for _, tc := range tests {
		got := CPUTopology(tc.vcpus, tc.topology)
		if got.Sockets != tc.want.Sockets || got.Cores != tc.want.Cores || got.Threads != tc.want.Threads {
			t.Errorf("%d vCPUs, %q: got %+v, want %+v", tc.vcpus, tc.topology, *got, tc.want)
		}
		if n := got.Sockets * got.Cores * got.Threads; n != tc.vcpus {
			t.Errorf("%d vCPUs, %q: topology holds %d", tc.vcpus, tc.topology, n)
		}
	}
}

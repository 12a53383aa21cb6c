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

package goldenkeeper

import (
	"testing"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
)

func TestState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		phase    cdiv1.DataVolumePhase
		restarts int32
		users    int
		want     string
	}{
		{name: "a new volume imports", phase: cdiv1.PhaseUnset, want: metrics.GoldenImporting},
		{name: "an import under way", phase: cdiv1.ImportInProgress, users: 3, want: metrics.GoldenImporting},
		{name: "CDI restarts a failed importer", phase: cdiv1.ImportInProgress, restarts: 2, users: 1, want: metrics.GoldenImportRetrying},
		{name: "the import failed for good", phase: cdiv1.Failed, restarts: 2, users: 1, want: metrics.GoldenImportFailed},
		{name: "imported and cloned", phase: cdiv1.Succeeded, restarts: 1, users: 2, want: metrics.GoldenInUse},
		{name: "imported, nobody left", phase: cdiv1.Succeeded, want: metrics.GoldenUnused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dv := &cdiv1.DataVolume{Status: cdiv1.DataVolumeStatus{Phase: tc.phase, RestartCount: tc.restarts}}
			if got := State(dv, tc.users); got != tc.want {
				t.Errorf("State() = %q, want %q", got, tc.want)
			}
		})
	}
}

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

package machine

import (
	"strings"
	"testing"
	"time"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

func TestNodeJoin(t *testing.T) {
	const image = "docker://quay.io/containerdisks/ubuntu:24.04"
	for _, tc := range []struct {
		name        string
		node        string
		runningFor  time.Duration
		wantState   outcome.State
		wantReason  string
		wantRequeue time.Duration
		wantInMsg   []string
	}{
		{name: "joined", node: "m-1", runningFor: time.Hour, wantState: outcome.Done, wantReason: infrav1.NodeJoinedReason, wantInMsg: []string{"m-1"}},
		{name: "just booted", runningFor: time.Minute, wantState: outcome.Waiting, wantReason: infrav1.WaitingForNodeReason, wantRequeue: 9 * time.Minute},
		{name: "never joined", runningFor: 11 * time.Minute, wantState: outcome.Failed, wantReason: infrav1.NodeNotJoinedReason,
			wantInMsg: []string{"within 10m0s", image, "v1.34.1", "docs/images.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := nodeJoin(tc.node, tc.runningFor, 10*time.Minute, image, "v1.34.1")
			if o.State != tc.wantState || o.Reason != tc.wantReason || o.RequeueAfter != tc.wantRequeue {
				t.Fatalf("got %+v, want state %v, reason %s, requeue %s", o, tc.wantState, tc.wantReason, tc.wantRequeue)
			}
			for _, part := range tc.wantInMsg {
				if !strings.Contains(o.Message, part) {
					t.Errorf("message %q lacks %q", o.Message, part)
				}
			}
		})
	}
}

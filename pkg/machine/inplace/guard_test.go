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

package inplace

import (
	"context"
	"sync"
	"testing"
	"time"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

func TestLimitedAnswersBusyPastTheCap(t *testing.T) {
	turns := make(limiter, 2)
	release := make(chan struct{})
	var started sync.WaitGroup
	slow := limited(turns, func(_ context.Context, _ *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
		started.Done()
		<-release
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	})
	var done sync.WaitGroup
	for range 2 {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			slow(context.Background(), &runtimehooksv1.UpdateMachineRequest{}, &runtimehooksv1.UpdateMachineResponse{})
		}()
	}
	started.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	resp := &runtimehooksv1.UpdateMachineResponse{}
	slow(ctx, &runtimehooksv1.UpdateMachineRequest{}, resp)
	if resp.Status != runtimehooksv1.ResponseStatusFailure {
		t.Fatalf("a third call while two run: %q %q, want a failure", resp.Status, resp.Message)
	}
	close(release)
	done.Wait()
	// The turns are free again; release stays closed, so the call ends.
	resp = &runtimehooksv1.UpdateMachineResponse{}
	started.Add(1)
	slow(context.Background(), &runtimehooksv1.UpdateMachineRequest{}, resp)
	if resp.Status != runtimehooksv1.ResponseStatusSuccess {
		t.Fatalf("a call once the others ended: %q, want success", resp.Status)
	}
}

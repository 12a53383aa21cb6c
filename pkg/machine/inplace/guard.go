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
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxConcurrentHookCalls is how many hook calls the extension answers at
// once: each may read the infra cluster, and the extension's port answers
// whoever reaches it.
const MaxConcurrentHookCalls = 4

// hookQueueWait is how long a call waits for a turn before it is answered
// with a failure, which Cluster API retries.
const hookQueueWait = 5 * time.Second

// limiter bounds the hook calls in progress.
type limiter chan struct{}

// limited runs f when a turn is free within hookQueueWait, else answers
// that the extension is busy.
func limited[Req any, Resp runtimehooksv1.ResponseObject](l limiter, f func(context.Context, Req, Resp)) func(context.Context, Req, Resp) {
	return func(ctx context.Context, req Req, resp Resp) {
		wait := time.NewTimer(hookQueueWait)
		defer wait.Stop()
		select {
		case l <- struct{}{}:
			defer func() { <-l }()
			f(ctx, req, resp)
		case <-wait.C:
			resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
			resp.SetMessage(fmt.Sprintf("the provider answers %d hook calls at once and is busy; ask again", cap(l)))
		case <-ctx.Done():
			resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
			resp.SetMessage("the call ended while waiting for a turn")
		}
	}
}

// sameMachine checks that a request's Machine is stored and that the
// stored one uses the KubevirtMachine the request carries: the extension
// answers only about a machine Cluster API could ask for, whatever a
// caller puts in the request. Cluster API strips UIDs from its requests,
// so the names are what can be checked.
func sameMachine(ctx context.Context, c client.Reader, m *clusterv1.Machine, infraNamespace, infraName string) error {
	stored := &clusterv1.Machine{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, stored); err != nil {
		return fmt.Errorf("reading Machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	if stored.Spec.InfrastructureRef.Name != infraName || m.Namespace != infraNamespace {
		return fmt.Errorf("the stored Machine %s/%s does not use KubevirtMachine %s/%s", m.Namespace, m.Name, infraNamespace, infraName)
	}
	return nil
}

// storedMachineSet checks that a request's MachineSet is stored.
func storedMachineSet(ctx context.Context, c client.Reader, ms *clusterv1.MachineSet) error {
	stored := &clusterv1.MachineSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}, stored); err != nil {
		return fmt.Errorf("reading MachineSet %s/%s: %w", ms.Namespace, ms.Name, err)
	}
	return nil
}

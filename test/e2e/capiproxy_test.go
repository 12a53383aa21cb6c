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

package e2e

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/cluster-api/test/framework"
)

// conflictRetryingProxy is the management cluster's proxy for Cluster
// API's specs, whose CreateOrUpdate applies again when an update met a
// write in between. The framework's CreateOrUpdate reads each object and
// updates it with the resourceVersion it read, without retrying a
// conflict (framework/cluster_proxy.go:407): KCPAdoptionSpec's second step
// updates the Cluster while Cluster API's controllers still write its
// status after the first step's machines turn Ready, and failed so
// (kcp_adoption.go:163, "the object has been modified"). Each retry reads
// every object again, as `kubectl apply` would.
type conflictRetryingProxy struct {
	framework.ClusterProxy
}

// CreateOrUpdate implements framework.ClusterProxy.
func (p conflictRetryingProxy) CreateOrUpdate(ctx context.Context, resources []byte, opts ...framework.CreateOrUpdateOption) error {
	return retry.OnError(retry.DefaultRetry, isConflict, func() error {
		return p.ClusterProxy.CreateOrUpdate(ctx, resources, opts...)
	})
}

// isConflict says whether err, or every error it aggregates, is a 409
// Conflict: the framework returns an aggregate, which errors.As does not
// look into.
func isConflict(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if !isConflict(e) {
				return false
			}
		}
		return len(agg.Errors()) > 0
	}
	return apierrors.IsConflict(err)
}

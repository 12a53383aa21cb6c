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

// This file reads the owners the controllers share.

package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// kubevirtClusterOf reads the KubevirtCluster of a Cluster; nil when the
// Cluster's infrastructure is something else or does not exist yet.
func kubevirtClusterOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*infrav1.KubevirtCluster, error) {
	infraRef := cluster.Spec.InfrastructureRef
	if infraRef.Kind != "KubevirtCluster" || infraRef.Name == "" {
		return nil, nil
	}
	kc := &infrav1.KubevirtCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: infraRef.Name}, kc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting KubevirtCluster %s: %w", infraRef.Name, err)
	}
	return kc, nil
}

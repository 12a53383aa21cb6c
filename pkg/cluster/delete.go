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

package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/controlplaneservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// Delete deletes what was created for the cluster: the control-plane
// Service, the NetworkPolicies, the per-cluster network, the tenant
// credential's ServiceAccount, Role and binding, and the SSH key Secret the
// provider generated. Objects that do not carry the cluster's
// owner annotation are left alone. The outcome is done once everything is
// gone; an unreachable infra cluster keeps the cluster waiting, since its
// objects may still be there. The Ready condition says what it waits for.
func (s *Service) Delete(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	kc, access := sc.KubevirtCluster, sc.Access
	var o outcome.Outcome
	if access.Outcome.Reason == infrav1.NotAllowedByPolicyReason && !createdAnything(kc) {
		// Refused from the start: nothing was created to delete.
		return outcome.Ready(clusterv1.DeletionCompletedReason, "the policy refused the cluster; nothing was created for it"), nil
	}
	if !access.Reachable() {
		o = outcome.Wait(infrav1.DeletingReason, "cannot delete the cluster's objects on the infra cluster until it can be used: "+
			access.Outcome.Message).After(access.Outcome.RequeueAfter)
		outcome.Set(kc, infrav1.ReadyCondition, o)
		return o, nil
	}
	waiting, err := s.deleteObjects(ctx, kc, access.Infra)
	switch {
	case err != nil:
		o = outcome.Fail(infrav1.DeletingReason, "deleting "+waiting+": "+err.Error())
	case waiting != "":
		o = outcome.Wait(infrav1.DeletingReason, "waiting for "+waiting+" to be deleted")
	default:
		return outcome.Ready(clusterv1.DeletionCompletedReason, "everything created for the cluster is gone"), nil
	}
	outcome.Set(kc, infrav1.ReadyCondition, o)
	return o, err
}

// createdAnything reports whether the cluster ever had its infra cluster to
// work with: each of these is recorded only once it did. A cluster the
// policy refuses after that (an administrator withdrew the grant) keeps
// waiting, since what it created may still be there.
func createdAnything(kc *infrav1.KubevirtCluster) bool {
	return conditions.Has(kc, infrav1.ControlPlaneEndpointReadyCondition) || conditions.Has(kc, infrav1.NetworkIsolationReadyCondition) ||
		conditions.Has(kc, infrav1.NetworksReadyCondition) || kc.Status.Network.PerCluster != "" || kc.Status.TenantCloud.ServiceAccount != ""
}

// deleteObjects deletes in order and reports what it still waits for; ""
// means everything is gone.
func (s *Service) deleteObjects(ctx context.Context, kc *infrav1.KubevirtCluster, infra *infracluster.Infra) (string, error) {
	gone, err := controlplaneservice.Delete(ctx, infra.Client, kc, infra.Namespace)
	if err != nil || !gone {
		return "the control-plane Service", err
	}
	if gone, err := isolation.Delete(ctx, infra.Client, kc, infra.Namespace); err != nil || !gone {
		return "the NetworkPolicies", err
	}
	// The recorded network, and the one the spec names in case the status
	// update after creating it was lost.
	nads := []string{kc.Status.Network.PerCluster}
	if kc.Spec.Network.PerCluster != nil {
		nads = append(nads, infra.Namespace+"/"+tenantnet.Name(kc))
	}
	for _, nad := range nads {
		if nad == "" {
			continue
		}
		if gone, err := tenantnet.Delete(ctx, infra.Client, kc, nad); err != nil || !gone {
			return "NetworkAttachmentDefinition " + nad, err
		}
	}
	kc.Status.Network = infrav1.ClusterNetworkStatus{}
	if clusterName := kc.Labels[infrav1.ClusterNameLabel]; clusterName != "" {
		if gone, err := s.TenantCloud.Delete(ctx, kc, clusterName, infra); err != nil || !gone {
			return "the tenant credential's ServiceAccount, Role and binding", err
		}
		kc.Status.TenantCloud = infrav1.TenantCloudStatus{}
	}
	if clusterName := kc.Labels[infrav1.ClusterNameLabel]; clusterName != "" {
		key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Spec.SSHKeys.SecretName(clusterName)}
		if gone, err := ownedobject.Delete(ctx, s.Client, &corev1.Secret{}, key, ownedobject.Key(kc)); err != nil || !gone {
			if err != nil {
				err = fmt.Errorf("deleting SSH key Secret %s: %w", key, err)
			}
			return "SSH key Secret " + key.String(), err
		}
	}
	return "", nil
}

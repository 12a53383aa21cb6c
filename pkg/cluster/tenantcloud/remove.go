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

package tenantcloud

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// disable removes a credential minted before: the infra objects, which
// revokes its tokens, and the tenant's Secret. A tenant that cannot be
// reached keeps its Secret, whose token no longer works.
func (k *Keeper) disable(ctx context.Context, kc *infrav1.KubevirtCluster, cluster string, infra *infracluster.Infra) (outcome.Outcome, error) {
	disabled := outcome.Ready(infrav1.DisabledReason, "no component of the tenant cluster asks for an infra credential")
	if kc.Status.TenantCloud.ServiceAccount == "" {
		return disabled, nil
	}
	gone, err := k.Delete(ctx, kc, cluster, infra)
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, "removing the tenant credential: "+err.Error()), err
	}
	if !gone {
		return outcome.Wait(infrav1.DeletingReason, "waiting for the infra ServiceAccount, Role and binding of the tenant credential to be deleted"), nil
	}
	tenant, err := k.ClusterCache.GetUncachedClient(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: cluster})
	switch {
	case errors.Is(err, clustercache.ErrClusterNotConnected):
	case err != nil:
		return outcome.Fail(infrav1.CredentialFailedReason, "removing the tenant cluster's Secret: "+err.Error()), err
	default:
		if _, err := ownedobject.Delete(ctx, tenant, &corev1.Secret{}, secretKey, ownedobject.Key(kc)); err != nil {
			err = fmt.Errorf("deleting the tenant cluster's Secret %s: %w", secretKey, err)
			return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
		}
	}
	kc.Status.TenantCloud = infrav1.TenantCloudStatus{}
	return disabled, nil
}

// Delete removes the infra ServiceAccount, Role and binding minted for the
// cluster, where the status recorded them and where they would be now, and
// reports whether they are gone. The tenant's Secret goes with the tenant
// cluster; its token is revoked with the ServiceAccount.
func (k *Keeper) Delete(ctx context.Context, kc *infrav1.KubevirtCluster, cluster string, infra *infracluster.Infra) (bool, error) {
	c, owner := direct(infra), ownedobject.Key(kc)
	if recorded := kc.Status.TenantCloud.ServiceAccount; recorded != "" {
		if gone, err := deleteRecorded(ctx, c, recorded, owner); err != nil || !gone {
			return false, err
		}
	}
	return DeleteAccess(ctx, c, Name(cluster), infra.Namespace, owner)
}

// deleteRecorded deletes the access recorded as "<namespace>/<name>".
func deleteRecorded(ctx context.Context, c client.Client, recorded, owner string) (bool, error) {
	ns, name, ok := strings.Cut(recorded, "/")
	if !ok {
		return true, nil
	}
	return DeleteAccess(ctx, c, name, ns, owner)
}

// directClient writes through the infra client and reads straight from
// the API server: the few objects of a credential are read when a cluster
// is reconciled, not worth an informer over every ServiceAccount and Role.
type directClient struct {
	client.Client
	reader client.Reader
}

func (d directClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return d.reader.Get(ctx, key, obj, opts...)
}

func direct(infra *infracluster.Infra) client.Client {
	return directClient{Client: infra.Client, reader: infra.APIReader}
}

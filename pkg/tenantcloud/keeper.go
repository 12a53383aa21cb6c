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
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/owned"
)

// Annotations of the tenant's Secret: when its token expires and is
// renewed, and the fingerprint of the access it was written for. They
// make the Secret the record of its own token, which is kept nowhere else.
const (
	ExpirationAnnotation = "tenantcloud.capkv.io/token-expiration-time"
	RenewalAnnotation    = "tenantcloud.capkv.io/token-renewal-time"
	AccessAnnotation     = "tenantcloud.capkv.io/access"
)

// Keys of the tenant's Secret: the kubeconfig, the token it names, and
// the VM namespace.
const (
	KubeconfigKey = "kubeconfig"
	TokenKey      = "token"
	NamespaceKey  = "namespace"
)

// Keeper keeps a tenant cluster's infra credential: the infra
// ServiceAccount, Role and binding, and a kubeconfig Secret in the tenant
// cluster whose token it replaces before it expires.
type Keeper struct {
	// ClusterCache reaches tenant clusters.
	ClusterCache clustercache.ClusterCache
	// Recorder records when a token is issued.
	Recorder events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (k *Keeper) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Reconcile keeps the credential of kc's tenant cluster, named cluster in
// kc's namespace, on infra (ref, when set, becomes the controller of what it
// creates there), and returns the outcome for the TenantCloudReady
// condition; a credential in place asks to be requeued when its token is
// due. With no component asking, it removes what was minted before.
func (k *Keeper) Reconcile(ctx context.Context, kc *infrav1.KubevirtCluster, cluster string, infra *infracluster.Infra, ref *metav1.OwnerReference) (outcome.Outcome, error) {
	spec := kc.Spec.TenantCloud
	if !spec.Enabled() {
		return k.disable(ctx, kc, cluster, infra)
	}
	owner, name := owned.Key(kc), Name(cluster)
	infraClient := direct(infra)
	sa, err := EnsureAccess(ctx, infraClient, name, infra.Namespace, map[string]string{infrav1.ClusterNameLabel: cluster}, owner, ref, spec.Components)
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	kc.Status.TenantCloud.ServiceAccount = infra.Namespace + "/" + name
	tenant, err := k.ClusterCache.GetUncachedClient(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: cluster})
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		// The cluster cache's connection events wake the cluster again.
		return outcome.Wait(infrav1.WaitingForTenantReason, fmt.Sprintf(
			"ServiceAccount %s is ready on the %s; waiting for the tenant cluster's API server to hand it the credential",
			kc.Status.TenantCloud.ServiceAccount, infra.Description())), nil
	}
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	access := Access{Server: cmp.Or(spec.InfraServer, infra.Server), CAData: infra.CAData, Namespace: infra.Namespace,
		ServiceAccount: name, ServiceAccountUID: string(sa.UID)}
	key := client.ObjectKey{Namespace: infrav1.TenantCloudSecretNamespace, Name: infrav1.TenantCloudSecretName}
	live := &corev1.Secret{}
	err = tenant.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		err = fmt.Errorf("reading the tenant's Secret %s: %w", key, err)
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	case !owned.IsOwnedBy(live, owner):
		return outcome.Fail(infrav1.CredentialFailedReason, fmt.Sprintf(
			"the tenant cluster's Secret %s exists but was not created for %s; rename or remove it", key, owner)), nil
	default:
		if expires, renew, ok := current(live, access, k.now()); ok {
			setStatus(kc, expires, renew)
			return issued(key, kc, expires, renew).After(renew.Sub(k.now())), nil
		}
	}

	token, expires, err := IssueToken(ctx, infraClient, sa, ptr.Deref(spec.TokenExpirationSeconds, infrav1.DefaultTenantCloudTokenExpirationSeconds))
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	now := k.now()
	renew := RenewalTime(now, expires)
	kubeconfig, err := Kubeconfig(access, token)
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Annotations: map[string]string{
			ExpirationAnnotation: expires.UTC().Format(time.RFC3339),
			RenewalAnnotation:    renew.UTC().Format(time.RFC3339),
			AccessAnnotation:     access.Hash(),
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KubeconfigKey: kubeconfig, TokenKey: []byte(token), NamespaceKey: []byte(infra.Namespace)},
	}
	// Replaced in place: the tenant never sees the Secret missing, and the
	// old token stays valid until it expires.
	_, change, err := owned.Ensure(ctx, tenant, want, &corev1.Secret{}, owner, nil, "tenant Secret", func(live, want *corev1.Secret) bool {
		maps.Copy(live.Annotations, want.Annotations)
		live.Data = want.Data
		return true
	})
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	action := "Issued"
	if change == owned.Corrected {
		action = "Rotated"
	}
	k.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, "TenantCredential"+action, "ReconcileTenantCloud",
		"%s the token of ServiceAccount %s in the tenant cluster's Secret %s; it expires at %s", action, kc.Status.TenantCloud.ServiceAccount,
		key, expires.UTC().Format(time.RFC3339))
	setStatus(kc, expires, renew)
	return issued(key, kc, expires, renew).After(renew.Sub(now)), nil
}

// current reports, for a Secret this provider wrote, whether its token is
// for access and not yet due, with its expiration and renewal times.
func current(s *corev1.Secret, access Access, now time.Time) (time.Time, time.Time, bool) {
	if s.Annotations[AccessAnnotation] != access.Hash() || len(s.Data[KubeconfigKey]) == 0 || len(s.Data[TokenKey]) == 0 {
		return time.Time{}, time.Time{}, false
	}
	expires, errE := time.Parse(time.RFC3339, s.Annotations[ExpirationAnnotation])
	renew, errR := time.Parse(time.RFC3339, s.Annotations[RenewalAnnotation])
	if errE != nil || errR != nil || !now.Before(renew) {
		return time.Time{}, time.Time{}, false
	}
	return expires, renew, true
}

func setStatus(kc *infrav1.KubevirtCluster, expires, renew time.Time) {
	kc.Status.TenantCloud.TokenExpirationTime = &metav1.Time{Time: expires.UTC().Truncate(time.Second)}
	kc.Status.TenantCloud.TokenRenewalTime = &metav1.Time{Time: renew.UTC().Truncate(time.Second)}
}

func issued(key client.ObjectKey, kc *infrav1.KubevirtCluster, expires, renew time.Time) outcome.Outcome {
	return outcome.Ready(infrav1.CredentialIssuedReason, fmt.Sprintf(
		"the tenant cluster's Secret %s holds a token of ServiceAccount %s that expires at %s and is replaced at %s",
		key, kc.Status.TenantCloud.ServiceAccount, expires.UTC().Format(time.RFC3339), renew.UTC().Format(time.RFC3339)))
}

// disable removes a credential minted before: the infra objects (which
// revokes the token) and, when the tenant cluster can be reached, its
// Secret.
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
	if tenant, err := k.ClusterCache.GetUncachedClient(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: cluster}); err == nil {
		key := client.ObjectKey{Namespace: infrav1.TenantCloudSecretNamespace, Name: infrav1.TenantCloudSecretName}
		if _, err := owned.Delete(ctx, tenant, &corev1.Secret{}, key, owned.Key(kc)); err != nil {
			err = fmt.Errorf("deleting the tenant cluster's Secret %s: %w", key, err)
			return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
		}
	}
	kc.Status.TenantCloud = infrav1.TenantCloudStatus{}
	return disabled, nil
}

// Delete removes the infra ServiceAccount, Role and binding minted for the
// cluster, and reports whether they are gone. The tenant's Secret goes
// with the tenant cluster; its token is revoked with the ServiceAccount.
func (k *Keeper) Delete(ctx context.Context, kc *infrav1.KubevirtCluster, cluster string, infra *infracluster.Infra) (bool, error) {
	return DeleteAccess(ctx, direct(infra), Name(cluster), infra.Namespace, owned.Key(kc))
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

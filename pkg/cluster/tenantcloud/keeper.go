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
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
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

// secretKey is the tenant's Secret.
var secretKey = client.ObjectKey{Namespace: infrav1.TenantCloudSecretNamespace, Name: infrav1.TenantCloudSecretName}

// DriftRecheck bounds how long a credential in place goes unchecked: no
// watch reaches the infra ServiceAccount, Role and binding or the tenant's
// Secret, so one deleted or changed by hand is put back (and a revoked
// token replaced) within this time, besides the renewal.
const DriftRecheck = time.Hour

// Reconcile keeps the credential of kc's tenant cluster, named cluster in
// kc's namespace, on infra (ref, when set, becomes the controller of what it
// creates there), and returns the outcome for the TenantCloudReady
// condition; a credential in place asks to be requeued when its token is
// due, or after DriftRecheck. With no component asking, it removes what was
// minted before.
func (k *Keeper) Reconcile(ctx context.Context, kc *infrav1.KubevirtCluster, cluster string, infra *infracluster.Infra, ref *metav1.OwnerReference) (outcome.Outcome, error) {
	spec := kc.Spec.TenantCloud
	if !spec.Enabled() {
		return k.disable(ctx, kc, cluster, infra)
	}
	shared := tenancy.Shared(infra.Namespace, kc.Namespace, infra.External, infra.Secret.Namespace)
	if r := tenancy.TenantCloud(spec, shared, infra.Guest, infra.Namespace, field.NewPath("spec", "tenantCloud", "components")); r != nil {
		// A credential minted before the namespace was shared goes.
		if _, err := k.disable(ctx, kc, cluster, infra); err != nil {
			return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
		}
		return outcome.Fail(infrav1.NotAllowedByPolicyReason, r.Error()), nil
	}
	owner, name := ownedobject.Key(kc), Name(cluster)
	infraClient := direct(infra)
	want := infra.Namespace + "/" + name
	if recorded := kc.Status.TenantCloud.ServiceAccount; recorded != "" && recorded != want {
		// The VM namespace changed: what was minted in the old one goes.
		if gone, err := deleteRecorded(ctx, infraClient, recorded, owner); err != nil || !gone {
			return outcome.Fail(infrav1.CredentialFailedReason, fmt.Sprintf("removing the credential in its old namespace, %s: %v", recorded, err)), err
		}
		kc.Status.TenantCloud = infrav1.TenantCloudStatus{}
	}
	// Recorded before anything is made, so that nothing made is forgotten.
	kc.Status.TenantCloud.ServiceAccount = want
	sa, err := EnsureAccess(ctx, infraClient, name, infra.Namespace, map[string]string{infrav1.ClusterNameLabel: cluster}, owner, ref, spec.Components)
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	tenant, err := k.ClusterCache.GetUncachedClient(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: cluster})
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		if o, ok := k.stillIssued(kc); ok {
			// A short outage of the connection changes nothing in the
			// tenant's Secret.
			return o, nil
		}
		// The cluster cache's connection events wake the cluster again.
		return outcome.Wait(infrav1.WaitingForTenantReason, fmt.Sprintf(
			"ServiceAccount %s is ready on the %s; waiting for the tenant cluster's API server to hand it the credential",
			want, infra.Description())), nil
	}
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	access := Access{Server: cmp.Or(spec.InfraServer, infra.Server), CAData: infra.CAData, TLSServerName: infra.TLSServerName,
		Insecure: infra.Insecure, Namespace: infra.Namespace, ServiceAccount: name, ServiceAccountUID: string(sa.UID)}
	lifetime := time.Duration(min(ptr.Deref(spec.TokenExpirationSeconds, infrav1.DefaultTenantCloudTokenExpirationSeconds),
		infrav1.MaxTenantCloudTokenExpirationSeconds)) * time.Second
	live := &corev1.Secret{}
	err = tenant.Get(ctx, secretKey, live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		err = fmt.Errorf("reading the tenant's Secret %s: %w", secretKey, err)
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	case !ownedobject.IsOwnedBy(live, owner):
		// No watch reaches the tenant's Secrets: look again for the user's
		// fix.
		return outcome.Fail(infrav1.CredentialFailedReason, fmt.Sprintf(
			"the tenant cluster's Secret %s exists but was not created for %s; rename or remove it", secretKey, owner)).After(outcome.Recheck(0)), nil
	default:
		if expires, renew, ok := current(live, access, lifetime, k.now()); ok {
			setStatus(kc, expires, renew)
			return issued(kc).After(min(renew.Sub(k.now()), DriftRecheck)), nil
		}
	}

	token, expires, err := IssueToken(ctx, infraClient, sa, int64(lifetime/time.Second))
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	now := k.now()
	renew := RenewalTime(now, expires)
	kubeconfig, err := Kubeconfig(access, token)
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretKey.Name, Namespace: secretKey.Namespace, Annotations: map[string]string{
			ExpirationAnnotation: expires.UTC().Format(time.RFC3339),
			RenewalAnnotation:    renew.UTC().Format(time.RFC3339),
			AccessAnnotation:     access.Hash(),
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KubeconfigKey: kubeconfig, TokenKey: []byte(token), NamespaceKey: []byte(infra.Namespace)},
	}
	// Replaced in place: the tenant never sees the Secret missing, and the
	// old token stays valid until it expires.
	_, change, err := ownedobject.Ensure(ctx, tenant, desired, &corev1.Secret{}, owner, nil, "tenant Secret", func(live, desired *corev1.Secret) bool {
		maps.Copy(live.Annotations, desired.Annotations)
		live.Data = desired.Data
		return true
	})
	if err != nil {
		return outcome.Fail(infrav1.CredentialFailedReason, err.Error()), err
	}
	action := "Issued"
	if change == ownedobject.Corrected {
		action = "Rotated"
	}
	k.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, "TenantCredential"+action, "ReconcileTenantCloud",
		"%s the token of ServiceAccount %s in the tenant cluster's Secret %s; it expires at %s", action, want,
		secretKey, expires.UTC().Format(time.RFC3339))
	setStatus(kc, expires, renew)
	return issued(kc).After(min(renew.Sub(now), DriftRecheck)), nil
}

// stillIssued is the outcome of a credential recorded as current, while
// the tenant cannot be reached to look at its Secret.
func (k *Keeper) stillIssued(kc *infrav1.KubevirtCluster) (outcome.Outcome, bool) {
	st := kc.Status.TenantCloud
	if st.TokenRenewalTime == nil || st.TokenExpirationTime == nil || !k.now().Before(st.TokenRenewalTime.Time) {
		return outcome.Outcome{}, false
	}
	return issued(kc).After(min(st.TokenRenewalTime.Sub(k.now()), DriftRecheck)), true
}

// clockSkew is how far the provider's clock and the API server's may
// differ before a token's expiration looks later than its lifetime allows.
const clockSkew = time.Minute

// current reports, for a Secret this provider wrote, whether its token is
// for access, not yet due, and not longer-lived than lifetime (which the
// user may have lowered), with its expiration and renewal times.
func current(s *corev1.Secret, access Access, lifetime time.Duration, now time.Time) (time.Time, time.Time, bool) {
	if s.Annotations[AccessAnnotation] != access.Hash() || len(s.Data[KubeconfigKey]) == 0 || len(s.Data[TokenKey]) == 0 {
		return time.Time{}, time.Time{}, false
	}
	expires, errE := time.Parse(time.RFC3339, s.Annotations[ExpirationAnnotation])
	renew, errR := time.Parse(time.RFC3339, s.Annotations[RenewalAnnotation])
	if errE != nil || errR != nil || !now.Before(renew) || expires.After(now.Add(lifetime+clockSkew)) {
		return time.Time{}, time.Time{}, false
	}
	return expires, renew, true
}

func setStatus(kc *infrav1.KubevirtCluster, expires, renew time.Time) {
	kc.Status.TenantCloud.TokenExpirationTime = &metav1.Time{Time: expires.UTC().Truncate(time.Second)}
	kc.Status.TenantCloud.TokenRenewalTime = &metav1.Time{Time: renew.UTC().Truncate(time.Second)}
}

// issued is the outcome of the credential recorded in kc's status.
func issued(kc *infrav1.KubevirtCluster) outcome.Outcome {
	st := kc.Status.TenantCloud
	return outcome.Ready(infrav1.CredentialIssuedReason, fmt.Sprintf(
		"the tenant cluster's Secret %s holds a token of ServiceAccount %s that expires at %s and is replaced at %s",
		secretKey, st.ServiceAccount, st.TokenExpirationTime.UTC().Format(time.RFC3339), st.TokenRenewalTime.UTC().Format(time.RFC3339)))
}

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
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
)

// Name names the ServiceAccount and RoleBinding minted on the infra
// cluster for a tenant cluster.
func Name(clusterName string) string { return clusterName + "-tenant-cloud" }

// EnsureAccess keeps, in the infra namespace ns, the ServiceAccount name
// and a RoleBinding of that name granting it the shipped ClusterRole of
// components, both marked for owner (ref, when set, as their controller),
// and returns the ServiceAccount. The provider holds "bind" on those
// ClusterRoles, not their verbs. A binding someone changed is put back.
func EnsureAccess(ctx context.Context, c client.Client, name, ns string, labels map[string]string, owner string, ref *metav1.OwnerReference, components []Component) (*corev1.ServiceAccount, error) {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	sa, _, err := ownedobject.Ensure(ctx, c,
		&corev1.ServiceAccount{ObjectMeta: *meta.DeepCopy(), AutomountServiceAccountToken: ptr.To(false)}, &corev1.ServiceAccount{},
		owner, ref, "ServiceAccount", func(_, _ *corev1.ServiceAccount) bool { return false })
	if err != nil {
		return nil, err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: *meta.DeepCopy(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName(components...)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	return sa, ensureBinding(ctx, c, binding, owner, ref)
}

// ensureBinding creates want, or corrects the subjects of the live binding
// of its name. A role reference cannot change, so a binding to another
// role (the components changed, or a Role minted by a release before the
// shipped ClusterRoles) is deleted, with such a Role, and made again.
func ensureBinding(ctx context.Context, c client.Client, want *rbacv1.RoleBinding, owner string, ref *metav1.OwnerReference) error {
	key := client.ObjectKeyFromObject(want)
	live := &rbacv1.RoleBinding{}
	err := c.Get(ctx, key, live)
	if err == nil && live.RoleRef == want.RoleRef && ownedobject.IsOwnedBy(live, owner) &&
		equality.Semantic.DeepEqual(live.Subjects, want.Subjects) {
		return nil
	}
	// A binding to a missing ClusterRole is allowed and grants nothing: the
	// tenant's components would fail with no word of why. Looked for
	// before a binding to another role is deleted, so that a working
	// credential is not taken away for one that cannot work.
	if err == nil || apierrors.IsNotFound(err) {
		if err := c.Get(ctx, client.ObjectKey{Name: want.RoleRef.Name}, &rbacv1.ClusterRole{}); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("ClusterRole %s is not installed on the infra cluster: apply the release's tenant-cloud-roles.yaml there (docs/tenant-cloud.md)", want.RoleRef.Name)
			}
			return fmt.Errorf("reading ClusterRole %s: %w", want.RoleRef.Name, err)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading RoleBinding %s: %w", key, err)
	case !ownedobject.IsOwnedBy(live, owner):
		return fmt.Errorf("RoleBinding %s exists but was not created for %s; rename or remove it", key, owner)
	case live.RoleRef == want.RoleRef:
		live.Subjects = want.Subjects
		if err := c.Update(ctx, live); err != nil {
			return fmt.Errorf("correcting drift of RoleBinding %s: %w", key, err)
		}
		return nil
	default:
		if err := ownedobject.DeleteLive(ctx, c, live); err != nil {
			return fmt.Errorf("deleting RoleBinding %s to %s %s: %w", key, live.RoleRef.Kind, live.RoleRef.Name, err)
		}
		if live.RoleRef.Kind == "Role" {
			if _, err := ownedobject.Delete(ctx, c, &rbacv1.Role{}, client.ObjectKey{Namespace: key.Namespace, Name: live.RoleRef.Name}, owner); err != nil {
				return fmt.Errorf("deleting Role %s/%s: %w", key.Namespace, live.RoleRef.Name, err)
			}
		}
	}
	ownedobject.Mark(want, owner)
	if ref != nil {
		want.SetOwnerReferences([]metav1.OwnerReference{*ref})
	}
	if err := c.Create(ctx, want); err != nil {
		return fmt.Errorf("creating RoleBinding %s: %w", key, err)
	}
	return nil
}

// IssueToken asks the infra API server for a token of sa that expires
// after seconds (the server may grant less), and returns it with its
// expiration time. The token is bound to the ServiceAccount: deleting it
// revokes every token issued.
func IssueToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, seconds int64) (string, time.Time, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds)}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
}

// DeleteAccess deletes the binding, a Role an earlier release minted, and
// the ServiceAccount name in ns where they are owner's, and reports
// whether all are gone. None has
// a finalizer, so a second look (c reads directly) finds each gone at
// once. Deleting the ServiceAccount revokes its tokens.
func DeleteAccess(ctx context.Context, c client.Client, name, ns, owner string) (bool, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	all := true
	for _, o := range []struct {
		obj  func() client.Object
		what string
	}{
		{func() client.Object { return &rbacv1.RoleBinding{} }, "RoleBinding"},
		{func() client.Object { return &rbacv1.Role{} }, "Role"},
		{func() client.Object { return &corev1.ServiceAccount{} }, "ServiceAccount"},
	} {
		gone, err := ownedobject.Delete(ctx, c, o.obj(), key, owner)
		if err == nil && !gone {
			gone, err = ownedobject.Delete(ctx, c, o.obj(), key, owner)
		}
		if err != nil {
			return false, fmt.Errorf("deleting %s %s: %w", o.what, key, err)
		}
		all = all && gone
	}
	return all, nil
}

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/owned"
)

// Name names the ServiceAccount, Role and RoleBinding minted on the infra
// cluster for a tenant cluster.
func Name(clusterName string) string { return clusterName + "-tenant-cloud" }

// EnsureAccess keeps, in the infra namespace ns, the ServiceAccount name,
// the Role of that name granting components what they need, and the
// binding between them, all marked for owner (ref, when set, as their
// controller), and returns the ServiceAccount. The Role follows the
// components; a Role or binding someone changed is put back.
func EnsureAccess(ctx context.Context, c client.Client, name, ns string, labels map[string]string, owner string, ref *metav1.OwnerReference, components []Component) (*corev1.ServiceAccount, error) {
	meta := func() metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels} }
	sa, _, err := owned.Ensure(ctx, c,
		&corev1.ServiceAccount{ObjectMeta: meta(), AutomountServiceAccountToken: ptr.To(false)}, &corev1.ServiceAccount{},
		owner, ref, "ServiceAccount", func(_, _ *corev1.ServiceAccount) bool { return false })
	if err != nil {
		return nil, err
	}
	role := Role(name, ns, components...)
	role.ObjectMeta = meta()
	if _, _, err := owned.Ensure(ctx, c, role, &rbacv1.Role{}, owner, ref, "Role", func(live, want *rbacv1.Role) bool {
		if equality.Semantic.DeepEqual(live.Rules, want.Rules) {
			return false
		}
		live.Rules = want.Rules
		return true
	}); err != nil {
		return nil, err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: meta(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, _, err := owned.Ensure(ctx, c, binding, &rbacv1.RoleBinding{}, owner, ref, "RoleBinding", func(live, want *rbacv1.RoleBinding) bool {
		// The role reference cannot change; a binding to another Role is
		// not one this provider made.
		if equality.Semantic.DeepEqual(live.Subjects, want.Subjects) {
			return false
		}
		live.Subjects = want.Subjects
		return true
	}); err != nil {
		return nil, err
	}
	return sa, nil
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

// DeleteAccess deletes the binding, the Role and the ServiceAccount name
// in ns where they are owner's, and reports whether all are gone. None has
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
		gone, err := owned.Delete(ctx, c, o.obj(), key, owner)
		if err == nil && !gone {
			gone, err = owned.Delete(ctx, c, o.obj(), key, owner)
		}
		if err != nil {
			return false, fmt.Errorf("deleting %s %s: %w", o.what, key, err)
		}
		all = all && gone
	}
	return all, nil
}

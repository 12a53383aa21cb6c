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

package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestHostileTenantRefusedAtAdmission has a tenant with nothing but the
// right to write Cluster API objects in its namespace try every class of
// the multi-tenancy policy (fixture.Hostile): each attempt is refused at
// admission, and the refusal names the field and the rule.
func TestHostileTenantRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	attacker, other := createNamespace(t, "attacker-"), createNamespace(t, "victim-")
	h := grantIdentities(t, attacker, other)
	if err := fixture.CreateStrays(ctx, env.Client, attacker); err != nil {
		t.Fatal(err)
	}
	tenant := tenantClient(t, attacker)
	attempts := h.Attempts()
	if len(attempts) < 30 {
		t.Fatalf("only %d attempts", len(attempts))
	}
	for i, a := range attempts {
		t.Run(a.Name, func(t *testing.T) {
			var obj client.Object
			if a.Cluster != nil {
				kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: fmt.Sprintf("hostile-%d", i)}}
				a.Cluster(kc)
				obj = kc
			} else {
				km := &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: fmt.Sprintf("hostile-%d", i),
					Labels: map[string]string{clusterv1.ClusterNameLabel: fixture.ClusterName}},
					Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: validVMSpec()}}}
				a.Machine(km)
				obj = km
			}
			err := tenant.Create(ctx, obj)
			if err == nil {
				t.Fatalf("accepted; want a refusal by rule %s", a.Rule)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rule "+a.Rule) {
				t.Fatalf("want an Invalid error naming rule %s, got %v", a.Rule, err)
			}
		})
	}
}

// grantIdentities creates what an administrator granted: an identity for
// the other tenant only, and one for the attacker's namespace with its own
// namespace as the only infra namespace.
func grantIdentities(t *testing.T, attacker, other string) fixture.Hostile {
	t.Helper()
	ctx := context.Background()
	h := fixture.Hostile{Other: other, OtherIdentity: other + "-only", OwnIdentity: attacker + "-own",
		SharedIdentity: attacker + "-shared", Shared: createNamespace(t, "shared-")}
	for _, id := range []*infrav1.KubevirtClusterIdentity{
		{ObjectMeta: metav1.ObjectMeta{Name: h.OtherIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{other}}, InfraNamespaces: []string{other}}},
		{ObjectMeta: metav1.ObjectMeta{Name: h.OwnIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{attacker}}, InfraNamespaces: []string{attacker}}},
		{ObjectMeta: metav1.ObjectMeta{Name: h.SharedIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{attacker}}, InfraNamespaces: []string{h.Shared}}},
	} {
		if err := env.Client.Create(ctx, id); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), id) })
	}
	return h
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// tenantClient is a client of a user who may write Cluster API and CAPKV
// objects in ns, and nothing else.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	name := "tenant-of-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{infrav1.GroupVersion.Group, clusterv1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(user.Config(), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIdentityRefCannotChange: a live cluster cannot move to another
// identity, not even one granted to its namespace, since what was created
// under the first would be left behind.
func TestIdentityRefCannotChange(t *testing.T) {
	ctx := context.Background()
	attacker, other := createNamespace(t, "attacker-"), createNamespace(t, "victim-")
	h := grantIdentities(t, attacker, other)
	kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "moving"}}
	if err := env.Client.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	tenant := tenantClient(t, attacker)
	// The controllers write the cluster meanwhile: update the latest.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
			return err
		}
		kc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.KubevirtClusterIdentityKind, Name: h.OwnIdentity}
		return tenant.Update(ctx, kc)
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.identityRef: Forbidden: cannot be changed") {
		t.Fatalf("want identityRef refused as immutable, got %v", err)
	}
}

// TestIdentityEmptyListRefused: an administrator who empties an identity's
// list, meaning to take every namespace away, must not grant them all; an
// empty list and an unset one store alike.
func TestIdentityEmptyListRefused(t *testing.T) {
	id := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.KubevirtClusterIdentityKind,
		"metadata": map[string]any{"name": "emptied"},
		"spec":     map[string]any{"allowedNamespaces": map[string]any{"list": []any{}}},
	}}
	err := env.Client.Create(context.Background(), id)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.allowedNamespaces.list") {
		_ = env.Client.Delete(context.Background(), id)
		t.Fatalf("want an empty allowedNamespaces.list refused, got %v", err)
	}
}

// TestInPlaceUpdateRefusedAtAdmission: an in-place update, which gives the
// running VM the spec's new annotations, is checked like a new machine.
func TestInPlaceUpdateRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	attacker := createNamespace(t, "attacker-")
	tenant := tenantClient(t, attacker)
	km := &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "grown",
		Labels: map[string]string{clusterv1.ClusterNameLabel: fixture.ClusterName}},
		Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: validVMSpec()}}}
	if err := tenant.Create(ctx, km); err != nil {
		t.Fatal(err)
	}
	km.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	km.Spec.VirtualMachineTemplate.ObjectMeta.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "kube-system/host"}
	err := tenant.Update(ctx, km)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rule "+tenancy.RuleGuestAnnotation) {
		t.Fatalf("want the in-place update refused by rule %s, got %v", tenancy.RuleGuestAnnotation, err)
	}
}

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

package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantcloud"
)

// probe is one action a service account may or may not take.
type probe struct {
	namespace, group, resource, subresource, verb string
}

func (p probe) String() string {
	r := p.resource
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	return p.verb + " " + p.group + "/" + r + " in " + orCluster(p.namespace)
}

func orCluster(ns string) string {
	if ns == "" {
		return "the cluster"
	}
	return "namespace " + ns
}

// allowed asks the real API server's authorizer whether the service
// account sa of namespace ns may take action p.
func allowed(ctx context.Context, t *testing.T, ns, sa string, p probe) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: p.namespace, Group: p.group, Resource: p.resource, Subresource: p.subresource, Verb: p.verb,
		},
	}}
	NewWithT(t).Expect(env.Client.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

// TestTenantCloudRoleIsLeast binds the Role tenantcloud builds for the
// cloud controller manager and the CSI driver to a service account, and
// checks with the real RBAC authorizer that it may do every listed action
// in its namespace and nothing else: not the same actions in another
// namespace, not Secrets, not nodes, nothing cluster-scoped.
func TestTenantCloudRoleIsLeast(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, other := newNamespace(t), newNamespace(t)
	const sa = "tenant-cloud"
	role := tenantcloud.Role(sa, ns, tenantcloud.CloudControllerManager, tenantcloud.CSIDriver)
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	})).To(Succeed())

	var granted []probe
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, v := range r.Verbs {
				granted = append(granted, probe{ns, r.APIGroups[0], resource, sub, v})
			}
		}
	}
	g.Expect(granted).To(HaveLen(26), "every verb of every rule is probed")
	// The authorizer learns of the binding from its informers.
	g.Eventually(func() bool { return allowed(ctx, t, ns, sa, granted[0]) }).WithTimeout(10 * time.Second).Should(BeTrue())
	for _, p := range granted {
		g.Expect(allowed(ctx, t, ns, sa, p)).To(BeTrue(), "%s is on the list", p)
	}

	refused := []probe{
		{ns, "", "secrets", "", "get"},
		{ns, "", "secrets", "", "list"},
		{other, "", "secrets", "", "get"},
		{other, "", "services", "", "create"},
		{other, "kubevirt.io", "virtualmachineinstances", "", "get"},
		{other, "cdi.kubevirt.io", "datavolumes", "", "create"},
		{other, "subresources.kubevirt.io", "virtualmachines", "addvolume", "update"},
		{other, "discovery.k8s.io", "endpointslices", "", "create"},
		{ns, "", "services", "", "deletecollection"},
		{ns, "", "services", "", "patch"},
		{ns, "", "pods", "", "list"},
		{ns, "", "pods", "exec", "create"},
		{ns, "", "configmaps", "", "get"},
		{ns, "", "serviceaccounts", "token", "create"},
		{ns, "rbac.authorization.k8s.io", "roles", "", "create"},
		{ns, "rbac.authorization.k8s.io", "rolebindings", "", "create"},
		{ns, "kubevirt.io", "virtualmachines", "", "create"},
		{ns, "kubevirt.io", "virtualmachines", "", "update"},
		{ns, "kubevirt.io", "virtualmachines", "", "delete"},
		{ns, "kubevirt.io", "virtualmachineinstances", "", "delete"},
		{ns, "cdi.kubevirt.io", "datavolumes", "", "update"},
		{ns, "cdi.kubevirt.io", "datavolumes", "source", "create"},
		{ns, "infrastructure.cluster.x-k8s.io", "kubevirtmachines", "", "get"},
		{"", "", "nodes", "", "get"},
		{"", "", "nodes", "", "list"},
		{"", "", "persistentvolumes", "", "get"},
		{"", "", "namespaces", "", "create"},
		{"", "rbac.authorization.k8s.io", "clusterroles", "", "create"},
		{"", "rbac.authorization.k8s.io", "clusterrolebindings", "", "create"},
		{"", "storage.k8s.io", "storageclasses", "", "create"},
	}
	for _, p := range refused {
		g.Expect(allowed(ctx, t, ns, sa, p)).To(BeFalse(), "%s is not on the list", p)
	}
}

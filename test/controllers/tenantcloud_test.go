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
	rbacv1 "k8s.io/api/rbac/v1"
)

// probe is one action a service account may or may not take.
type probe struct {
	namespace, group, resource, subresource, verb string
	// name, when set, is the one object the action is on.
	name string
}

func (p probe) String() string {
	r := p.resource
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.name != "" {
		r += " " + p.name
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
			Namespace: p.namespace, Group: p.group, Resource: p.resource, Subresource: p.subresource, Verb: p.verb, Name: p.name,
		},
	}}
	NewWithT(t).Expect(env.Client.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

// expectLeastAccess checks with the real RBAC authorizer that the service
// account sa of namespace ns may take every action of rules in ns, wants
// of them, and none of a sample of others: the same actions in other
// namespace, any Secret (another cluster's kubeconfig among them), nodes,
// anything cluster-scoped.
func expectLeastAccess(ctx context.Context, t *testing.T, ns, sa, other string, rules []rbacv1.PolicyRule, wants int) {
	t.Helper()
	g := NewWithT(t)
	var granted []probe
	for _, r := range rules {
		for _, res := range r.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, v := range r.Verbs {
				granted = append(granted, probe{namespace: ns, group: r.APIGroups[0], resource: resource, subresource: sub, verb: v})
			}
		}
	}
	g.Expect(granted).To(HaveLen(wants), "every verb of every rule is probed")
	// The authorizer learns of the binding from its informers.
	g.Eventually(func() bool { return allowed(ctx, t, ns, sa, granted[0]) }).WithTimeout(10 * time.Second).Should(BeTrue())
	for _, p := range granted {
		g.Expect(allowed(ctx, t, ns, sa, p)).To(BeTrue(), "%s is on the list", p)
	}

	refused := []probe{
		{namespace: ns, resource: "secrets", verb: "get"},
		{namespace: ns, resource: "secrets", verb: "list"},
		{namespace: ns, resource: "secrets", verb: "get", name: "other-cluster-kubeconfig"},
		{namespace: other, resource: "secrets", verb: "get"},
		{namespace: other, resource: "services", verb: "create"},
		{namespace: other, group: "kubevirt.io", resource: "virtualmachineinstances", verb: "get"},
		{namespace: other, group: "cdi.kubevirt.io", resource: "datavolumes", verb: "create"},
		{namespace: other, group: "subresources.kubevirt.io", resource: "virtualmachines", subresource: "addvolume", verb: "update"},
		{namespace: other, group: "discovery.k8s.io", resource: "endpointslices", verb: "create"},
		{namespace: ns, resource: "services", verb: "deletecollection"},
		{namespace: ns, resource: "services", verb: "patch"},
		{namespace: ns, resource: "pods", verb: "list"},
		{namespace: ns, resource: "pods", subresource: "exec", verb: "create"},
		{namespace: ns, resource: "configmaps", verb: "get"},
		{namespace: ns, resource: "serviceaccounts", subresource: "token", verb: "create"},
		{namespace: ns, group: "rbac.authorization.k8s.io", resource: "roles", verb: "create"},
		{namespace: ns, group: "rbac.authorization.k8s.io", resource: "rolebindings", verb: "create"},
		{namespace: ns, group: "kubevirt.io", resource: "virtualmachines", verb: "create"},
		{namespace: ns, group: "kubevirt.io", resource: "virtualmachines", verb: "update"},
		{namespace: ns, group: "kubevirt.io", resource: "virtualmachines", verb: "delete"},
		{namespace: ns, group: "kubevirt.io", resource: "virtualmachineinstances", verb: "delete"},
		{namespace: ns, group: "cdi.kubevirt.io", resource: "datavolumes", verb: "update"},
		{namespace: ns, group: "cdi.kubevirt.io", resource: "datavolumes", subresource: "source", verb: "create"},
		{namespace: ns, group: "infrastructure.cluster.x-k8s.io", resource: "kubevirtmachines", verb: "get"},
		{resource: "nodes", verb: "get"},
		{resource: "nodes", verb: "list"},
		{resource: "persistentvolumes", verb: "get"},
		{resource: "namespaces", verb: "create"},
		{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "create"},
		{group: "rbac.authorization.k8s.io", resource: "clusterrolebindings", verb: "create"},
		{group: "storage.k8s.io", resource: "storageclasses", verb: "create"},
	}
	for _, p := range refused {
		g.Expect(allowed(ctx, t, ns, sa, p)).To(BeFalse(), "%s is not on the list", p)
	}
}

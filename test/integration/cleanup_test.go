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

package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// policyNames lists the NetworkPolicies in a namespace.
func policyNames(ns string) func() []string {
	return func() []string {
		list := &networkingv1.NetworkPolicyList{}
		if err := w.Env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return []string{err.Error()}
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names
	}
}

func TestIsolationDriftOptOutAndCustomPolicies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	custom := infrav1.CustomNetworkPolicy{Name: "scrape", Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	tc := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{custom}
	})
	eventually(t, policyNames(tc.ns)).Should(ConsistOf("tenant-isolation", "tenant-api-server", "tenant-scrape"))
	eventually(t, tc.clusterCondition(infrav1.NetworkIsolationReadyCondition)).Should(HavePrefix(infrav1.AppliedReason))
	// A policy someone else made is never touched.
	foreign := &networkingv1.NetworkPolicy{}
	foreign.Name, foreign.Namespace = "admin-deny-all", tc.ns
	g.Expect(w.Env.Client.Create(ctx, foreign)).To(Succeed())

	// Drift is corrected.
	key := client.ObjectKey{Namespace: tc.ns, Name: "tenant-isolation"}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &networkingv1.NetworkPolicy{}
		if err := w.Env.Client.Get(ctx, key, p); err != nil {
			return err
		}
		p.Spec.Egress = nil
		return w.Env.Client.Update(ctx, p)
	})).To(Succeed())
	eventually(t, func() int {
		p := &networkingv1.NetworkPolicy{}
		_ = w.Env.Client.Get(ctx, key, p)
		return len(p.Spec.Egress)
	}).Should(BeNumerically(">=", 3))

	// Opting out removes the isolation policies and keeps the custom one;
	// removing that deletes it too.
	update := func(mutate func(*infrav1.KubevirtCluster)) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			kc := get(t, tc.c, tc.kc)
			mutate(kc)
			return tc.c.Update(ctx, kc)
		})).To(Succeed())
	}
	update(func(kc *infrav1.KubevirtCluster) { kc.Spec.Isolation.Mode = infrav1.IsolationDisabled })
	eventually(t, policyNames(tc.ns)).Should(ConsistOf("tenant-scrape", "admin-deny-all"))
	eventually(t, tc.clusterCondition(infrav1.NetworkIsolationReadyCondition)).Should(HavePrefix(infrav1.DisabledReason))
	update(func(kc *infrav1.KubevirtCluster) { kc.Spec.CustomNetworkPolicies = nil })
	eventually(t, policyNames(tc.ns)).Should(ConsistOf("admin-deny-all"))
}

func TestClusterDeletionLeavesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tmpl := vlanTemplate(t)
	withEverything := func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: tmpl}
		kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{{Name: "extra", Spec: networkingv1.NetworkPolicySpec{}}}
	}
	doomed := ownedCluster(t, withEverything)
	kept := ownedCluster(t, withEverything)
	for _, tc := range []*tenantCluster{doomed, kept} {
		eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
		// The ssh check makes the provider generate the cluster's key Secret.
		km := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-0", Mutate: withCheck(infrav1.CheckStrategySSH)})
		eventually(t, tc.provisioned(km)).Should(Succeed())
		g.Expect(w.Env.Client.Get(ctx, keyOf(tc.ns, "tenant-ssh-keys"), &corev1.Secret{})).To(Succeed())
		// Cluster API deletes the machines before the infrastructure.
		g.Expect(tc.c.Delete(ctx, km)).To(Succeed())
		eventually(t, func() bool { return apierrors.IsNotFound(tc.c.Get(ctx, client.ObjectKeyFromObject(km), km)) }).Should(BeTrue())
	}
	// The user's own key Secret outlives its cluster.
	userKeys := ownedCluster(t, func(kc *infrav1.KubevirtCluster) { kc.Spec.SSHKeys.DataSecretName = ptr.To("my-keys") })
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-keys", Namespace: userKeys.ns}})).To(Succeed())
	eventually(t, userKeys.endpoint()).Should(MatchRegexp(`:6443$`))
	for _, tc := range []*tenantCluster{doomed, userKeys} {
		g.Expect(tc.c.Delete(ctx, tc.kc)).To(Succeed())
		eventually(t, func() bool {
			return apierrors.IsNotFound(tc.c.Get(ctx, client.ObjectKeyFromObject(tc.kc), &infrav1.KubevirtCluster{}))
		}).Should(BeTrue())
	}
	g.Expect(w.Env.Client.Get(ctx, keyOf(userKeys.ns, "my-keys"), &corev1.Secret{})).To(Succeed())

	g.Expect(apierrors.IsNotFound(w.Env.Client.Get(ctx, keyOf(doomed.ns, "tenant-lb"), &corev1.Service{}))).To(BeTrue())
	g.Expect(policyNames(doomed.ns)()).To(BeEmpty())
	g.Expect(nadConfig(doomed.ns, "tenant-tenant")()).To(ContainSubstring("not found"))
	g.Expect(apierrors.IsNotFound(w.Env.Client.Get(ctx, keyOf(doomed.ns, "tenant-ssh-keys"), &corev1.Secret{}))).To(BeTrue())

	// The other cluster keeps all of its objects.
	g.Expect(w.Env.Client.Get(ctx, keyOf(kept.ns, "tenant-lb"), &corev1.Service{})).To(Succeed())
	g.Expect(policyNames(kept.ns)()).To(ConsistOf("tenant-isolation", "tenant-api-server", "tenant-extra"))
	g.Expect(nadConfig(kept.ns, "tenant-tenant")()).To(ContainSubstring(`"vlan":`))
	g.Expect(w.Env.Client.Get(ctx, keyOf(kept.ns, "tenant-ssh-keys"), &corev1.Secret{})).To(Succeed())
}

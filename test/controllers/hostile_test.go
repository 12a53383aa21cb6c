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
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// hostileLabel marks the namespaces of the attacker's clusters, which its
// own identity selects.
const hostileLabel = "capkv.test/hostile"

// TestHostileTenantStoppedByControllers makes every attempt of
// fixture.Hostile with the webhooks off, against a provider running with
// the shipped RBAC (config/rbac/role.yaml) rather than as an
// administrator: each object reports NotAllowedByPolicy naming the rule,
// and nothing was created outside the attacker's namespaces.
func TestHostileTenantStoppedByControllers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := shippedRBACConfig(t)
	m, err := testenv.StartManager(cfg, manager.Options{WatchFilterValue: "hostile", ProviderNamespace: "capkv-system"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})

	other := newNamespace(t)
	h := fixture.Hostile{Other: other, OtherIdentity: other + "-only", OwnIdentity: other + "-attacker",
		SharedIdentity: other + "-shared", Shared: newNamespace(t)}
	for _, id := range []*infrav1.KubevirtClusterIdentity{
		{ObjectMeta: metav1.ObjectMeta{Name: h.OtherIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{other}}, InfraNamespaces: []string{other}}},
		// The attacker's namespaces, by label; their VMs stay at home.
		{ObjectMeta: metav1.ObjectMeta{Name: h.OwnIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{hostileLabel: other}}}}},
		// A namespace the attackers share.
		{ObjectMeta: metav1.ObjectMeta{Name: h.SharedIdentity}, Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{hostileLabel: other}}},
			InfraNamespaces:   []string{h.Shared}}},
	} {
		g.Expect(env.Client.Create(ctx, id)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), id) })
	}

	type attempt struct {
		fixture.Attempt
		tn *tenant
	}
	var attempts []attempt
	var attackers []string
	for _, a := range h.Attempts() {
		if a.AdmissionOnly {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "attacker-", Labels: map[string]string{hostileLabel: other}}}
		g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
		g.Expect(fixture.CreateStrays(ctx, env.Client, ns.Name)).To(Succeed())
		attackers = append(attackers, ns.Name)
		attempts = append(attempts, attempt{Attempt: a, tn: createTenant(t, ns.Name, "hostile", a.Cluster, a.Machine)})
	}
	g.Expect(len(attempts)).To(BeNumerically(">=", 30))
	for _, a := range attempts {
		t.Run(a.Name, func(t *testing.T) {
			NewWithT(t).Eventually(refusal(a.tn), 30*time.Second).Should(ContainSubstring("rule "+a.Rule),
				"no condition of the KubevirtCluster or KubevirtMachine says NotAllowedByPolicy")
		})
	}

	// Nothing exists where the attacker may not place anything; no VM or
	// import was created at all.
	for _, ns := range []string{other, "kube-system", "default"} {
		// User data Secrets carry the machine's label, not the cluster's.
		for list, label := range map[client.ObjectList]string{&kubevirtv1.VirtualMachineList{}: "cluster.x-k8s.io/cluster-name",
			&corev1.ServiceList{}: "cluster.x-k8s.io/cluster-name", &cdiv1.DataVolumeList{}: "cluster.x-k8s.io/cluster-name",
			&corev1.SecretList{}: infrav1.KubevirtMachineLabel} {
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.HasLabels{label})).To(Succeed())
			g.Expect(list).To(HaveField("Items", BeEmpty()), "%T in namespace %s", list, ns)
		}
	}
	for _, ns := range attackers {
		vms := &kubevirtv1.VirtualMachineList{}
		g.Expect(env.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
		g.Expect(vms.Items).To(BeEmpty(), "a VM was created in %s", ns)
		dvs := &cdiv1.DataVolumeList{}
		g.Expect(env.Client.List(ctx, dvs, client.InNamespace(ns))).To(Succeed())
		g.Expect(dvs.Items).To(BeEmpty(), "a DataVolume (a golden image's import) was created in %s", ns)
	}
}

// refusal is the message of the first NotAllowedByPolicy condition of the
// tenant's KubevirtCluster or KubevirtMachine, or "".
func refusal(tn *tenant) func() string {
	return func() string {
		for _, obj := range []client.Object{tn.kc, tn.km} {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				return ""
			}
			conds := obj.(interface{ GetConditions() []metav1.Condition }).GetConditions()
			for _, c := range conds {
				if c.Reason == infrav1.NotAllowedByPolicyReason {
					return c.Message
				}
			}
		}
		return ""
	}
}

// shippedRBACConfig authenticates as the provider's ServiceAccount, bound
// to the ClusterRole of config/rbac/role.yaml as the release binds it.
func shippedRBACConfig(t *testing.T) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	data, err := os.ReadFile("../../config/rbac/role.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Name = "capkv-shipped-manager-role"
	const sa = "system:serviceaccount:capkv-system:capkv-manager"
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capkv-shipped-manager-rolebinding"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: sa}}}
	for _, o := range []client.Object{role, binding} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:capkv-system", "system:authenticated"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	cfg := user.Config()
	cfg.QPS, cfg.Burst = env.Config.QPS, env.Config.Burst
	return cfg
}

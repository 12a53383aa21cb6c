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
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// tenantCluster is a fixture tenant with the test's shorthands.
type tenantCluster struct {
	*fixture.Tenant
	// c reaches the management cluster of the world the tenant lives in.
	c       client.Client
	ns      string
	cluster *clusterv1.Cluster
	kc      *infrav1.KubevirtCluster
}

func newTenantCluster(t *testing.T, mutate func(*infrav1.KubevirtCluster)) *tenantCluster {
	t.Helper()
	return newTenantClusterOn(t, w.Env.Client, fixture.TenantOptions{Mutate: mutate})
}

// ownedCluster creates a tenant whose KubevirtCluster is owned by its
// Cluster, as Cluster API does, so the provider provisions it.
func ownedCluster(t *testing.T, mutate func(*infrav1.KubevirtCluster)) *tenantCluster {
	t.Helper()
	return newTenantClusterOn(t, w.Env.Client, fixture.TenantOptions{Owned: true, Mutate: mutate})
}

// newTenantClusterOn creates the tenant through the management client c.
func newTenantClusterOn(t *testing.T, c client.Client, o fixture.TenantOptions) *tenantCluster {
	t.Helper()
	tn, err := fixture.NewTenant(context.Background(), c, o)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &tenantCluster{Tenant: tn, c: c, ns: tn.Namespace, cluster: tn.Cluster, kc: tn.KubevirtCluster}
}

// newMachine creates a Machine, its bootstrap Secret and its
// KubevirtMachine, owned as Cluster API owns them.
func (tc *tenantCluster) newMachine(t *testing.T, o fixture.MachineOptions) *infrav1.KubevirtMachine {
	t.Helper()
	_, km, err := tc.NewMachine(context.Background(), o)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return km
}

// get reads the current state of an object from the management cluster.
func get[T client.Object](t *testing.T, c client.Client, obj T) T {
	t.Helper()
	NewWithT(t).Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// condition returns "Status/Reason: message" of a condition, for readable
// assertions.
func condition(km *infrav1.KubevirtMachine, t string) string {
	c := conditions.Get(km, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// reason polls the reason of a condition of a KubevirtMachine.
func (tc *tenantCluster) reason(km *infrav1.KubevirtMachine, t string) func() string {
	return func() string {
		cur := &infrav1.KubevirtMachine{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(km), cur); err != nil {
			return err.Error()
		}
		if c := conditions.Get(cur, t); c != nil {
			return c.Reason
		}
		return "<none>"
	}
}

// provisioned polls whether a KubevirtMachine is provisioned and Ready.
func (tc *tenantCluster) provisioned(km *infrav1.KubevirtMachine) func() error {
	return func() error {
		cur := &infrav1.KubevirtMachine{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(km), cur); err != nil {
			return err
		}
		if !ptr.Deref(cur.Status.Initialization.Provisioned, false) || !cur.Status.Ready || !conditions.IsTrue(cur, infrav1.ReadyCondition) {
			return fmt.Errorf("not provisioned: Ready %s; VirtualMachineReady %s; BootstrapSucceeded %s",
				condition(cur, infrav1.ReadyCondition), condition(cur, infrav1.VirtualMachineReadyCondition), condition(cur, infrav1.BootstrapSucceededCondition))
		}
		return nil
	}
}

// infraObject reads an object of the machine from the infra cluster.
func infraGet(t *testing.T, c client.Client, ns, name string, obj client.Object) error {
	t.Helper()
	return c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// guestOutcome polls what the simulated guest did with its bootstrap data.
func guestOutcome(c client.Client, ns, name string) func() string {
	return func() string {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
			return err.Error()
		}
		return vmi.Annotations["sim.capkv.io/guest"]
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// setBootstrapSecret plays the bootstrap provider: it sets the Machine's
// bootstrap data Secret.
func (tc *tenantCluster) setBootstrapSecret(t *testing.T, machine, secret string) {
	t.Helper()
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: machine, Namespace: tc.ns}})
	m.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	NewWithT(t).Expect(tc.c.Update(context.Background(), m)).To(Succeed())
}

// reachable gives the tenant a workload cluster its guests join and the
// provider reaches: its endpoint, CA and kubeconfig Secret, as Cluster
// API's control plane would make them. It returns the cluster's key.
func (tc *tenantCluster) reachable(t *testing.T) types.NamespacedName {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: tc.ns, Name: tc.cluster.Name}
	host, port, err := w.Workloads.EnsureCluster(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = w.Workloads.DeleteCluster(key) })
	cluster := get(t, tc.c, tc.cluster)
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	g.Expect(certs.LookupOrGenerate(ctx, w.Env.Client, key, *metav1.NewControllerRef(cluster, clusterv1.GroupVersion.WithKind("Cluster")))).To(Succeed())
	cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: port}
	g.Expect(w.Env.Client.Update(ctx, cluster)).To(Succeed())
	g.Expect(kubeconfig.CreateSecret(ctx, w.Env.Client, cluster)).To(Succeed())
	return key
}

// bridgeNetwork creates a NetworkAttachmentDefinition of a bridge on a VLAN
// in the tenant's namespace.
func (tc *tenantCluster) bridgeNetwork(t *testing.T, name string, vlan int) {
	t.Helper()
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(tc.ns)
	nad.SetName(name)
	g := NewWithT(t)
	g.Expect(unstructured.SetNestedField(nad.Object, fmt.Sprintf(`{"cniVersion":"0.3.1","type":"bridge","bridge":"br-tenant","vlan":%d,"ipam":{}}`, vlan), "spec", "config")).To(Succeed())
	g.Expect(w.Env.Client.Create(context.Background(), nad)).To(Succeed())
}

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

package world_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// tenantCAs generates a tenant's certificate authorities as Cluster API
// does, owned by a ConfigMap so the garbage collector keeps them.
func tenantCAs(t *testing.T, key types.NamespacedName) []byte {
	g := NewWithT(t)
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-owner"}}
	g.Expect(w.Env.Client.Create(ctx, owner)).To(Succeed())
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	g.Expect(certs.LookupOrGenerate(ctx, w.Env.Client, key, metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID})).To(Succeed())
	return certs.GetByPurpose(secret.ClusterCA).KeyPair.Cert
}

// TestTenantsShareALoadBalancerPort serves two tenants on the same port of
// two load balancer addresses, as two control-plane Services on 6443 are:
// each address answers with its own tenant's API server, under a
// certificate for that address from the tenant's own CA.
func TestTenantsShareALoadBalancerPort(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	for i, host := range []string{"127.1.200.1", "127.1.200.2"} {
		key := types.NamespacedName{Namespace: ns, Name: []string{"alpha", "beta"}[i]}
		ca := tenantCAs(t, key)
		addr, err := w.Workloads.EnsureClusterAt(ctx, key, host, 6443)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addr).To(Equal(host + ":6443"))
		t.Cleanup(func() { _ = w.Workloads.DeleteCluster(key) })
		g.Expect(w.Workloads.Join(ctx, world.Member{Cluster: key, NodeName: key.Name + "-cp", ControlPlane: true, Version: "v1.34.1"})).To(Succeed())

		c, err := client.New(&rest.Config{Host: "https://" + addr, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, client.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		nodes := &corev1.NodeList{}
		g.Expect(c.List(ctx, nodes)).To(Succeed(), "the certificate for %s is signed by %s's CA", host, key.Name)
		g.Expect(nodes.Items).To(ConsistOf(HaveField("Name", key.Name+"-cp")), "%s serves %s", host, key.Name)
	}
}

// TestGuestOfAnotherProviderJoins boots a VM without this provider's
// labels, named after a Machine's infrastructure object as other providers
// name theirs: its guest joins the Machine's tenant cluster.
func TestGuestOfAnotherProviderJoins(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "other"}
	_, _, err := w.Workloads.EnsureCluster(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = w.Workloads.DeleteCluster(key) })
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-md-0-x"},
		Spec: clusterv1.MachineSpec{ClusterName: key.Name, Version: "v1.34.1",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("other-md-0-x")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "OtherMachine", Name: "other-vm-0"}},
	}
	g.Expect(w.Env.Client.Create(ctx, machine)).To(Succeed())
	data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-vm-0-userdata", Namespace: ns},
		Data: map[string][]byte{"userdata": []byte("#cloud-config\nruncmd:\n- kubeadm join\n")}}
	g.Expect(w.Env.Client.Create(ctx, data)).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, vm(ns, "other-vm-0", func(v *kubevirtv1.VirtualMachine) {
		withKubernetesImage(v)
		v.Spec.Template.Spec.Volumes = append(v.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: data.Name}}}})
	}))).To(Succeed())
	g.Eventually(func() error {
		_, err := w.Workloads.Node(ctx, key, "other-vm-0")
		return err
	}, 30*time.Second).Should(Succeed())
	node, err := w.Workloads.Node(ctx, key, "other-vm-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.34.1"), "the kubelet of the image")
}

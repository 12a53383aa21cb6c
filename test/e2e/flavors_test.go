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

package e2e

import (
	"context"
	"slices"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// The administrator's per-cluster network template the multus flavor
// names by default.
const (
	vlanTemplateNamespace = "capkv-network-templates"
	vlanTemplateName      = "tenant-vlan"
)

// prepareFlavor creates what a flavor expects to exist before its cluster
// is applied, as its section of docs/flavors.md says: the administrator's
// VLAN template for multus, the infra kubeconfig Secret for external-infra.
func prepareFlavor(ctx context.Context, flavor, ns string) {
	switch flavor {
	case "multus":
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vlanTemplateNamespace}}))).To(Succeed())
		nad := &unstructured.Unstructured{}
		nad.SetAPIVersion("k8s.cni.cncf.io/v1")
		nad.SetKind("NetworkAttachmentDefinition")
		nad.SetNamespace(vlanTemplateNamespace)
		nad.SetName(vlanTemplateName)
		nad.SetAnnotations(map[string]string{infrav1.VLANRangeAnnotation: "200-299"})
		Expect(unstructured.SetNestedField(nad.Object,
			`{"cniVersion":"0.3.1","type":"bridge","bridge":"br-tenants","vlan":{{ .VLANID }},"ipam":{"type":"whereabouts","range":"192.168.0.0/16"}}`,
			"spec", "config")).To(Succeed())
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, nad))).To(Succeed())
	case "external-infra":
		Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infra-kubeconfig"},
			Data: map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: w.Infra.KubeConfig}})).To(Succeed())
	}
}

// checkFlavor checks, on a running cluster of a flavor, what makes the
// flavor what it is.
func checkFlavor(ctx context.Context, flavor string, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) {
	ns := kc.Namespace
	vm := &kubevirtv1.VirtualMachine{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vm)).To(Succeed())
	switch flavor {
	case "nodeport":
		svc := &corev1.Service{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kc.Name + "-lb"}, svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		infraA := &corev1.Node{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: "infra-a"}, infraA)).To(Succeed())
		Expect(kc.Spec.ControlPlaneEndpoint).To(Equal(infrav1.APIEndpoint{Host: sim.InternalIP(infraA), Port: svc.Spec.Ports[0].NodePort}),
			"without a host, the endpoint is the first infra node's address and the node port")
	case "multus":
		Expect(kc.Status.Network.PerCluster).To(Equal(ns+"/"+kc.Name+"-tenant"), "the cluster's own network")
		Expect(kc.Status.Network.VLANID).To(BeNumerically(">=", 200))
		networks := vm.Spec.Template.Spec.Networks
		Expect(networks).To(ContainElement(HaveField("Name", "default")), "the pod network is kept")
		i := slices.IndexFunc(networks, func(n kubevirtv1.Network) bool { return n.Name == "tenant" })
		Expect(i).NotTo(Equal(-1), "the VM is on the tenant network")
		Expect(networks[i].Multus.NetworkName).To(Equal(kc.Status.Network.PerCluster))
		Expect(km.Status.Addresses).NotTo(BeEmpty())
		Expect(km.Status.Addresses[0].Address).To(HavePrefix("192.168."), "the node address is on the VLAN network")
		machine := &clusterv1.Machine{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.OwnerReferences[0].Name}, machine)).To(Succeed())
		node, err := w.Workloads.Node(ctx, types.NamespacedName{Namespace: ns, Name: machine.Spec.ClusterName}, machine.Status.NodeRef.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(internalIP(node)).To(Equal(km.Status.Addresses[0].Address),
			"the kubelet reports the VLAN address its DHCP gave, not the masquerade address every VM shares")
		policy := &networkingv1.NetworkPolicy{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kc.Name + "-isolation"}, policy)).To(Succeed(),
			"isolation still holds on the pod network")
	case "ignition":
		machine := &clusterv1.Machine{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.OwnerReferences[0].Name}, machine)).To(Succeed())
		data := &corev1.Secret{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ptr.Deref(machine.Spec.Bootstrap.DataSecretName, "")}, data)).To(Succeed())
		Expect(string(data.Data["format"])).To(Equal("ignition"), "the kubeadm bootstrap provider wrote Ignition")
		Expect(string(data.Data["value"])).To(ContainSubstring(`"ignition":{`))
		// Cluster API matches a Node to its Machine by providerID only, and
		// an Ignition kubelet here sets none: the provider did.
		Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "the Node was matched by the providerID the provider set")
	case "external-infra":
		Expect(vm.OwnerReferences).To(BeEmpty(), "owner references cannot cross clusters: the external path was taken")
		secret := &corev1.Secret{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "infra-kubeconfig"}, secret)).To(Succeed())
		Expect(movable.Labelled(secret)).To(BeTrue(), "the kubeconfig Secret moves with the cluster")
	case "performance":
		pods := &corev1.PodList{}
		Expect(w.Infra.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pod := pods.Items[0]
		Expect(pod.Status.QOSClass).To(Equal(corev1.PodQOSGuaranteed))
		Expect(pod.Spec.NodeSelector).To(HaveKeyWithValue(sim.CPUManagerLabel, "true"))
		Expect(pod.Spec.Containers[0].Resources.Requests).To(HaveKey(corev1.ResourceName("hugepages-2Mi")))
		Expect(vm.Spec.Template.Spec.Domain.IOThreadsPolicy).To(HaveValue(Equal(kubevirtv1.IOThreadsPolicyAuto)))
	case "cloud-provider", "cloud-provider-csi":
		checkTenantCloud(ctx, flavor, kc)
	case "persistent-storage":
		Expect(km.Status.GoldenImage).To(BeNil(), "no golden image")
		dv := &cdiv1.DataVolume{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name + "-rootdisk"}, dv)).To(Succeed())
		Expect(dv.Spec.Source.Registry).NotTo(BeNil(), "the VM imported its own root disk, the flavor's container disk")
	}
}

// createIPPool makes an InClusterIPPool of Cluster API's in-cluster IPAM
// provider with the addresses of range (a /24, no gateway: the pod network
// keeps the default route).
func createIPPool(ctx context.Context, ns, name, addresses string) {
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("ipam.cluster.x-k8s.io/v1alpha2")
	pool.SetKind("InClusterIPPool")
	pool.SetNamespace(ns)
	pool.SetName(name)
	Expect(unstructured.SetNestedField(pool.Object, map[string]any{"addresses": []any{addresses}, "prefix": int64(24)}, "spec")).To(Succeed())
	Expect(c.Create(ctx, pool)).To(Succeed())
}

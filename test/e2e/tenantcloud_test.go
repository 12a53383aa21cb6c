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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// checkTenantCloud checks a running cluster of the cloud-provider flavors:
// the provider handed the tenant a working infra credential, limited to
// the cluster's namespace, and the flavor's ClusterResourceSets created
// the CCM (and the CSI driver) in the tenant cluster.
func checkTenantCloud(ctx context.Context, flavor string, kc *infrav1.KubevirtCluster) {
	ns := kc.Namespace
	Eventually(func() *string {
		Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		if cond := conditions.Get(kc, infrav1.TenantCloudReadyCondition); cond != nil {
			return &cond.Reason
		}
		return nil
	}, time.Minute).Should(HaveValue(Equal(infrav1.CredentialIssuedReason)))
	tenant, _, err := tenantClient(ctx, ns, kc.Name)
	Expect(err).NotTo(HaveOccurred())

	By("the tenant's Secret holds a kubeconfig that reaches the VM namespace, and nothing else")
	secret := &corev1.Secret{}
	Expect(tenant.Get(ctx, client.ObjectKey{Namespace: infrav1.TenantCloudSecretNamespace, Name: infrav1.TenantCloudSecretName}, secret)).To(Succeed())
	Expect(string(secret.Data[tenantcloud.NamespaceKey])).To(Equal(ns))
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[tenantcloud.KubeconfigKey])
	Expect(err).NotTo(HaveOccurred())
	asTenant, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	Expect(asTenant.List(ctx, &corev1.ServiceList{}, client.InNamespace(ns))).To(Succeed())
	Expect(apierrors.IsForbidden(asTenant.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))).To(BeTrue())
	Expect(apierrors.IsForbidden(asTenant.List(ctx, &corev1.NodeList{}))).To(BeTrue())

	By("the ClusterResourceSets created the cloud components in the tenant cluster")
	Eventually(func() error {
		return tenant.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubevirt-cloud-controller-manager"}, &appsv1.Deployment{})
	}, time.Minute).Should(Succeed())
	checkNodesInitialized(ctx, tenant, asTenant, kc, flavor == "cloud-provider")
	if flavor == "cloud-provider-csi" {
		checkLoadBalancer(ctx, tenant, kc)
	}
	if flavor != "cloud-provider-csi" {
		return
	}
	Eventually(func() error {
		return tenant.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubevirt-csi-controller"}, &appsv1.Deployment{})
	}, time.Minute).Should(Succeed())
	Expect(tenant.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubevirt-csi-node"}, &appsv1.DaemonSet{})).To(Succeed())
	Expect(tenant.Get(ctx, client.ObjectKey{Name: "csi.kubevirt.io"}, &storagev1.CSIDriver{})).To(Succeed())
	sc := &storagev1.StorageClass{}
	Expect(tenant.Get(ctx, client.ObjectKey{Name: "kubevirt"}, sc)).To(Succeed())
	Expect(sc.Provisioner).To(Equal("csi.kubevirt.io"))
	Expect(sc.Parameters).To(HaveKeyWithValue("infraStorageClassName", ""), "empty: the infra cluster's default")
}

// checkNodesInitialized checks that the world's CCM, acting with the
// tenant's credential alone, initialized every Node its kubelet (run with
// cloud-provider: external) left tainted. With dropVerb, it then takes
// get on VM instances out of the credential's ClusterRole: a Node tainted
// again stays so, the CCM's call Forbidden, until the verb is back.
func checkNodesInitialized(ctx context.Context, tenant, asTenant client.Client, kc *infrav1.KubevirtCluster, dropVerb bool) {
	By("the CCM initialized every Node through the credential: the uninitialized taint is gone")
	cluster := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
	nodes := &corev1.NodeList{}
	Eventually(func(g Gomega) {
		g.Expect(tenant.List(ctx, nodes)).To(Succeed())
		g.Expect(nodes.Items).NotTo(BeEmpty())
		// The node controller syncs only Nodes that carry the taint: its
		// event says the kubelet put it there and the CCM took it off.
		events := &corev1.EventList{}
		g.Expect(tenant.List(ctx, events, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		synced := map[string]bool{}
		for _, e := range events.Items {
			if e.Reason == "Synced" && e.Source.Component == "cloud-node-controller" {
				synced[e.InvolvedObject.Name] = true
			}
		}
		for _, n := range nodes.Items {
			g.Expect(synced).To(HaveKey(n.Name), "the CCM synced node %s", n.Name)
			g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", world.TaintUninitialized)), "node %s: %s",
				n.Name, w.Workloads.CloudControllerError(cluster, n.Name))
			g.Expect(n.Spec.ProviderID).To(Equal("kubevirt://" + n.Name))
			vmi := &kubevirtv1.VirtualMachineInstance{}
			g.Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: n.Name}, vmi)).To(Succeed())
			g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
			g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: vmi.Status.Interfaces[0].IP}),
				"the address of the instance's default interface")
		}
	}, time.Minute).Should(Succeed())
	if !dropVerb {
		return
	}

	By("without get on VM instances in its ClusterRole, the CCM is Forbidden and a Node tainted again stays tainted")
	binding := &rbacv1.RoleBinding{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: kc.Name + "-tenant-cloud"}, binding)).To(Succeed())
	role := &rbacv1.ClusterRole{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: binding.RoleRef.Name}, role)).To(Succeed())
	original := role.DeepCopy()
	restore := func() {
		current := &rbacv1.ClusterRole{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: original.Name}, current)).To(Succeed())
		current.Rules = original.Rules
		Expect(w.Infra.Client.Update(ctx, current)).To(Succeed())
	}
	DeferCleanup(restore)
	dropped := 0
	for i, rule := range role.Rules {
		if slices.Contains(rule.Resources, "virtualmachineinstances") {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "get" })
			dropped++
		}
	}
	Expect(dropped).To(Equal(1), "the role grants VM instances in one rule")
	Expect(w.Infra.Client.Update(ctx, role)).To(Succeed())
	// The API server's authorizer follows the role through an informer:
	// taint the Node only once the credential is refused.
	Eventually(func() bool {
		err := asTenant.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: nodes.Items[0].Name}, &kubevirtv1.VirtualMachineInstance{})
		return apierrors.IsForbidden(err)
	}, time.Minute).Should(BeTrue())
	node := &nodes.Items[0]
	Expect(tenant.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: world.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	Expect(tenant.Update(ctx, node)).To(Succeed())
	Eventually(func() string { return w.Workloads.CloudControllerError(cluster, node.Name) }, time.Minute).Should(
		MatchRegexp(`getting the instance of node .*: virtualmachineinstances.kubevirt.io .* is forbidden: User "system:serviceaccount:` +
			kc.Namespace + ":" + kc.Name + `-tenant-cloud" cannot get resource "virtualmachineinstances"`))
	Expect(tenant.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
	Expect(node.Spec.Taints).To(ContainElement(HaveField("Key", world.TaintUninitialized)))

	By("with the verb back, the CCM initializes the Node")
	restore()
	Eventually(func(g Gomega) {
		g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		g.Expect(node.Spec.Taints).NotTo(ContainElement(HaveField("Key", world.TaintUninitialized)))
	}, time.Minute).Should(Succeed())
	Eventually(func() string { return w.Workloads.CloudControllerError(cluster, node.Name) }, time.Minute).Should(BeEmpty())
}

// checkLoadBalancer has the tenant ask for a LoadBalancer Service: the
// world's CCM, with the credential, makes an infra Service that selects
// the worker VMs on the Service's node port, copies its address back, and
// deletes it with the tenant's Service.
func checkLoadBalancer(ctx context.Context, tenant client.Client, kc *infrav1.KubevirtCluster) {
	By("a tenant LoadBalancer Service gets an infra Service on the workers' node port, and its address")
	// The in-memory tenant API server allocates no node ports; the
	// Service names one, as a user may.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}}}}
	Expect(tenant.Create(ctx, svc)).To(Succeed())
	infraSvc := &corev1.Service{}
	Eventually(func(g Gomega) {
		list := &corev1.ServiceList{}
		g.Expect(w.Infra.Client.List(ctx, list, client.InNamespace(kc.Namespace),
			client.MatchingLabels{"cluster.x-k8s.io/tenant-service-name": "web", "cluster.x-k8s.io/tenant-service-namespace": "default"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		*infraSvc = list.Items[0]
		g.Expect(infraSvc.Status.LoadBalancer.Ingress).NotTo(BeEmpty())
		g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		g.Expect(svc.Status.LoadBalancer.Ingress).To(Equal(infraSvc.Status.LoadBalancer.Ingress))
	}, time.Minute).Should(Succeed(), "CCM: %s", w.Workloads.CloudControllerError(types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}, "default/web"))
	Expect(svc.UID).NotTo(BeEmpty())
	Expect(infraSvc.Name).To(Equal(("a" + strings.ReplaceAll(string(svc.UID), "-", ""))[:32]), "named as the service controller names it")
	Expect(infraSvc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
	Expect(infraSvc.Spec.Ports).To(ConsistOf(HaveField("TargetPort", intstr.FromInt32(30080))))
	Expect(infraSvc.Spec.Selector).To(Equal(map[string]string{"cluster.x-k8s.io/role": "worker", "cluster.x-k8s.io/cluster-name": kc.Name}))
	// The flavor's cluster has no worker; its control plane's launcher
	// pod shows the VMs carry both keys, with the role the selector skips.
	pods := &corev1.PodList{}
	Expect(w.Infra.Client.List(ctx, pods, client.InNamespace(kc.Namespace), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": kc.Name})).To(Succeed())
	Expect(pods.Items).NotTo(BeEmpty())
	Expect(pods.Items[0].Labels).To(HaveKeyWithValue("cluster.x-k8s.io/role", "control-plane"))

	By("deleting the tenant Service deletes the infra Service")
	Expect(tenant.Delete(ctx, svc)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(w.Infra.Client.Get(ctx, client.ObjectKeyFromObject(infraSvc), &corev1.Service{}))
	}, time.Minute).Should(BeTrue())
	Eventually(func() bool {
		return apierrors.IsNotFound(tenant.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))
	}, time.Minute).Should(BeTrue(), "the cleanup finalizer is gone")
}

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
	"crypto/sha256"
	"fmt"
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
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
	if flavor != "cloud-provider-csi" {
		return
	}
	checkLoadBalancer(ctx, tenant, kc)
	Eventually(func() error {
		return tenant.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubevirt-csi-controller"}, &appsv1.Deployment{})
	}, time.Minute).Should(Succeed())
	Expect(tenant.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubevirt-csi-node"}, &appsv1.DaemonSet{})).To(Succeed())
	Expect(tenant.Get(ctx, client.ObjectKey{Name: "csi.kubevirt.io"}, &storagev1.CSIDriver{})).To(Succeed())
	sc := &storagev1.StorageClass{}
	Expect(tenant.Get(ctx, client.ObjectKey{Name: "kubevirt"}, sc)).To(Succeed())
	Expect(sc.Provisioner).To(Equal("csi.kubevirt.io"))
	Expect(sc.Parameters).To(HaveKeyWithValue("infraStorageClassName", ""), "empty: the infra cluster's default")
	checkVolumes(ctx, tenant, asTenant, kc)
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
	restore := withoutVerb(ctx, kc, "virtualmachineinstances", "get", func() error {
		return asTenant.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: nodes.Items[0].Name}, &kubevirtv1.VirtualMachineInstance{})
	})
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

// withoutVerb takes a verb on a resource out of the ClusterRole bound to
// the cluster's credential, waits until call, made with the credential,
// is Forbidden (the API server's authorizer follows the role through an
// informer), and returns what puts the role back, also run at cleanup.
func withoutVerb(ctx context.Context, kc *infrav1.KubevirtCluster, resource, verb string, call func() error) (restore func()) {
	binding := &rbacv1.RoleBinding{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: kc.Name + "-tenant-cloud"}, binding)).To(Succeed())
	role := &rbacv1.ClusterRole{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: binding.RoleRef.Name}, role)).To(Succeed())
	original := role.DeepCopy()
	restore = func() {
		current := &rbacv1.ClusterRole{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: original.Name}, current)).To(Succeed())
		current.Rules = original.Rules
		Expect(w.Infra.Client.Update(ctx, current)).To(Succeed())
	}
	DeferCleanup(restore)
	dropped := 0
	for i, rule := range role.Rules {
		if slices.Contains(rule.Resources, resource) {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
			dropped++
		}
	}
	Expect(dropped).To(Equal(1), "the role grants %s in one rule", resource)
	Expect(w.Infra.Client.Update(ctx, role)).To(Succeed())
	// Only the authorizer's refusal counts: a webhook's is a 403 too.
	Eventually(func() bool {
		err := call()
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot "+verb+" resource")
	}, time.Minute).Should(BeTrue())
	return restore
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

// checkVolumes has the tenant claim a volume of the flavor's StorageClass.
// The world's CSI controller, with the credential alone, makes its
// DataVolume and binds the claim; without create on DataVolumes in the
// credential's ClusterRole, that is Forbidden and the claim waits. A
// VolumeAttachment, as the attach-detach controller makes one for a pod
// on the Node, hot-plugs the volume into the Node's VM through virt-api
// (with HotplugVolumes on, as docs/tenant-cloud.md says), and deleting it
// unplugs it; deleting the claim deletes the DataVolume.
func checkVolumes(ctx context.Context, tenant, asTenant client.Client, kc *infrav1.KubevirtCluster) {
	cluster := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
	restoreKubeVirt, err := testenv.PatchKubeVirt(ctx, c, testenv.HotplugVolumesPatch)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(restoreKubeVirt(ctx)).To(Succeed()) })

	By("without create on DataVolumes in its ClusterRole, the CSI controller cannot provision a claim")
	probe := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: "pvc-probe"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	restoreRole := withoutVerb(ctx, kc, "datavolumes", "create", func() error { return asTenant.Create(ctx, probe.DeepCopy(), client.DryRunAll) })
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("kubevirt"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	Expect(tenant.Create(ctx, claim)).To(Succeed())
	Eventually(func() string { return w.Workloads.CSIControllerError(cluster, "PersistentVolumeClaim default/data") }, time.Minute).Should(
		MatchRegexp(`failed to provision volume with StorageClass "kubevirt": datavolumes.cdi.kubevirt.io is forbidden: User "system:serviceaccount:` +
			kc.Namespace + ":" + kc.Name + `-tenant-cloud" cannot create resource "datavolumes"`))
	Expect(tenant.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	Expect(claim.Spec.VolumeName).To(BeEmpty())

	By("with the verb back, the claim binds to a volume whose DataVolume the credential made")
	restoreRole()
	Eventually(func(g Gomega) {
		g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
	}, time.Minute).Should(Succeed(), func() string { return w.Workloads.CSIControllerError(cluster, "PersistentVolumeClaim default/data") })
	Expect(claim.Spec.VolumeName).To(Equal("pvc-" + string(claim.UID)))
	pv := &corev1.PersistentVolume{}
	Expect(tenant.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv)).To(Succeed())
	Expect(pv.Spec.CSI).NotTo(BeNil())
	Expect(pv.Spec.CSI.Driver).To(Equal("csi.kubevirt.io"))
	dv := &cdiv1.DataVolume{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: pv.Spec.CSI.VolumeHandle}, dv)).To(Succeed())
	Expect(dv.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", kc.Name), "the driver's --infra-cluster-labels")
	Expect(dv.Spec.Source.Blank).NotTo(BeNil())
	Expect(pv.Spec.CSI.VolumeAttributes).To(HaveKeyWithValue("serial", string(dv.UID)))

	By("a VolumeAttachment hot-plugs the volume into the Node's VM")
	nodes := &corev1.NodeList{}
	Expect(tenant.List(ctx, nodes)).To(Succeed())
	Expect(nodes.Items).NotTo(BeEmpty())
	node := nodes.Items[0].Name
	// The attach-detach controller's name for it.
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("csi-%x", sha256.Sum256([]byte(pv.Spec.CSI.VolumeHandle+"csi.kubevirt.io"+node)))},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.kubevirt.io", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv.Name}}}
	Expect(tenant.Create(ctx, va)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(va), va)).To(Succeed())
		g.Expect(va.Status.Attached).To(BeTrue())
	}, 2*time.Minute).Should(Succeed(), func() string {
		return fmt.Sprintf("CSI: %s; hot-plug: %s", w.Workloads.CSIControllerError(cluster, "VolumeAttachment "+va.Name),
			w.Workloads.CSIControllerError(cluster, "VirtualMachine "+node))
	})
	vmi := &kubevirtv1.VirtualMachineInstance{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: node}, vmi)).To(Succeed())
	Expect(vmi.Status.VolumeStatus).To(ContainElement(And(HaveField("Name", dv.Name), HaveField("Phase", kubevirtv1.VolumeReady),
		HaveField("HotplugVolume", Not(BeNil())))))
	vm := &kubevirtv1.VirtualMachine{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: node}, vm)).To(Succeed())
	Expect(vm.Spec.Template.Spec.Domain.Devices.Disks).To(ContainElement(And(HaveField("Name", dv.Name), HaveField("Serial", string(dv.UID)))))

	By("deleting the VolumeAttachment unplugs the volume")
	Expect(tenant.Delete(ctx, va)).To(Succeed())
	Eventually(func() bool { return apierrors.IsNotFound(tenant.Get(ctx, client.ObjectKeyFromObject(va), va)) }, 2*time.Minute).Should(BeTrue(),
		func() string { return w.Workloads.CSIControllerError(cluster, "VolumeAttachment "+va.Name) })
	Expect(c.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: node}, vmi)).To(Succeed())
	Expect(vmi.Status.VolumeStatus).NotTo(ContainElement(HaveField("Name", dv.Name)))
	Expect(c.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: node}, vm)).To(Succeed())
	Expect(vm.Spec.Template.Spec.Volumes).NotTo(ContainElement(HaveField("Name", dv.Name)))

	By("deleting the claim deletes its volume and DataVolume")
	Expect(tenant.Delete(ctx, claim)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(dv), &cdiv1.DataVolume{})) &&
			apierrors.IsNotFound(tenant.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}))
	}, time.Minute).Should(BeTrue(), func() string { return w.Workloads.CSIControllerError(cluster, "PersistentVolume "+pv.Name) })
}

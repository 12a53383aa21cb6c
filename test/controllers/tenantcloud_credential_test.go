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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
)

// tenantSecretKey is where the provider writes the infra kubeconfig in the
// tenant cluster.
var tenantSecretKey = client.ObjectKey{Namespace: infrav1.TenantCloudSecretNamespace, Name: infrav1.TenantCloudSecretName}

// tokenOf is the token of the kubeconfig in the tenant's Secret, the same
// inline and in the file the kubeconfig names.
func tokenOf(g Gomega, s *corev1.Secret) string {
	cfg, err := clientcmd.Load(s.Data[tenantcloud.KubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	g.Expect(user.TokenFile).To(Equal(tenantcloud.MountPath + "/" + tenantcloud.TokenKey))
	g.Expect(string(s.Data[tenantcloud.TokenKey])).To(Equal(user.Token), "the token file and the inline token agree")
	return user.Token
}

// connectTenant makes the tenant cluster of tn reachable as Cluster API
// does: a kubeconfig Secret (of this same API server) and the
// infrastructure marked provisioned.
func connectTenant(ctx context.Context, g Gomega, tn *tenant) {
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tn.cluster.Name + "-kubeconfig", Namespace: tn.cluster.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: tn.cluster.Name}},
		Data: map[string][]byte{"value": env.KubeConfig},
	})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.cluster), tn.cluster)).To(Succeed())
	tn.cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, tn.cluster)).To(Succeed())
}

// touch changes a label of kc, which wakes the provider.
func touch(ctx context.Context, g Gomega, kc *infrav1.KubevirtCluster, value string) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
	patch := client.MergeFrom(kc.DeepCopy())
	kc.Labels["test.capkv.io/touched"] = value
	g.Expect(env.Client.Patch(ctx, kc, patch)).To(Succeed())
}

// uninstallClusterRole deletes the shipped ClusterRole name, as on an
// infra cluster where an administrator has not applied it, and returns what
// puts it back; the test's end puts it back too, for the tests after.
func uninstallClusterRole(ctx context.Context, t *testing.T, name string) func() {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, role)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, role)).To(Succeed())
	restore := func() {
		_ = env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Labels: role.Labels}, Rules: role.Rules})
	}
	t.Cleanup(restore)
	return restore
}

// deleteTenantSecret removes the tenant's Secret when the test ends: the
// tests share this API server as their tenant cluster.
func deleteTenantSecret(ctx context.Context, t *testing.T) {
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantSecretKey.Namespace, Name: tenantSecretKey.Name}})
	})
}

// authenticates asks the real API server whether token is valid now.
func authenticates(ctx context.Context, g Gomega, token string) bool {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	g.Expect(env.Client.Create(ctx, review)).To(Succeed())
	return review.Status.Authenticated
}

// tenantSecretGap says what is wrong with the tenant's Secret, if
// anything: missing, or holding a token the API server rejects.
func tenantSecretGap(ctx context.Context) string {
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, tenantSecretKey, s); err != nil {
		return "Secret unreadable: " + err.Error()
	}
	cfg, err := clientcmd.Load(s.Data[tenantcloud.KubeconfigKey])
	if err != nil {
		return "kubeconfig unreadable: " + err.Error()
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token}}
	if err := env.Client.Create(ctx, review); err != nil {
		return "token review failed: " + err.Error()
	}
	if !review.Status.Authenticated {
		return "token rejected: " + review.Status.Error
	}
	return ""
}

// TestTenantCloudCredential follows the credential the provider mints for
// a tenant's cloud controller manager and CSI driver, on a real API server
// that plays both the infra cluster and, through a kubeconfig Secret as
// Cluster API writes it, the tenant cluster: its permissions, the Secret
// it writes into the tenant, a rotation during which the Secret always
// holds a valid token, and its removal with the cluster.
func TestTenantCloudCredential(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The provider's clock runs ahead by skew, so that the test need not
	// wait out most of a token's lifetime.
	var skew atomic.Int64
	// The provider runs with the shipped RBAC: it binds the shipped
	// ClusterRole without holding its verbs.
	startManagerAs(t, shippedRBACConfig(t), manager.Options{WatchFilterValue: "tenantcloud", TenantConnectionRetryInterval: time.Second,
		InProcess: manager.InProcess{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}})
	ns, other := newNamespace(t), newNamespace(t)
	tn := createTenant(t, ns, "tenantcloud", func(kc *infrav1.KubevirtCluster) {
		kc.Spec.TenantCloud = infrav1.TenantCloudSpec{
			Components:             []infrav1.TenantCloudComponent{infrav1.TenantCloudControllerManager, infrav1.TenantCSIDriver},
			TokenExpirationSeconds: ptr.To[int64](3600),
		}
	}, nil)
	name := tenantcloud.Name(tn.cluster.Name)

	// Before the tenant's API server answers, the infra side is ready and
	// the condition says what the credential waits for.
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.WaitingForTenantReason))
	g.Expect(tn.kc.Status.TenantCloud.ServiceAccount).To(Equal(ns + "/" + name))
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, binding)).To(Succeed())
	g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capkv-tenant-ccm-csi"}))
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-cluster-kubeconfig", Namespace: ns}})).To(Succeed())
	expectLeastAccess(ctx, t, ns, name, other, tenantcloud.Rules(tenantcloud.CloudControllerManager, tenantcloud.CSIDriver), 26)

	// The tenant cluster becomes reachable as Cluster API makes it so: a
	// kubeconfig Secret, and the infrastructure marked provisioned.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tn.cluster.Name + "-kubeconfig", Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: tn.cluster.Name}},
		Data: map[string][]byte{"value": env.KubeConfig},
	})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.cluster), tn.cluster)).To(Succeed())
	tn.cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, tn.cluster)).To(Succeed())
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 60*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.CredentialIssuedReason))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantSecretKey.Namespace, Name: tenantSecretKey.Name}})
	})

	first := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, tenantSecretKey, first)).To(Succeed())
	g.Expect(string(first.Data[tenantcloud.NamespaceKey])).To(Equal(ns))
	token := tokenOf(g, first)
	expires := tn.kc.Status.TenantCloud.TokenExpirationTime.Time
	g.Expect(expires).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute))
	g.Expect(tn.kc.Status.TenantCloud.TokenRenewalTime.Time).To(BeTemporally("~", time.Now().Add(48*time.Minute), time.Minute))

	// The isolation policies let the VMs reach the infra API server where
	// kube-proxy sends them, and the infra load balancers reach the
	// workers' node ports.
	apiServer := &discoveryv1.EndpointSliceList{}
	g.Expect(env.Client.List(ctx, apiServer, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"})).To(Succeed())
	g.Expect(apiServer.Items).NotTo(BeEmpty())
	isolation := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tn.kc.Name + "-isolation"}, isolation)).To(Succeed())
	g.Expect(isolation.Spec.Egress).To(ContainElement(HaveField("To", ContainElement(HaveField("IPBlock.CIDR",
		apiServer.Items[0].Endpoints[0].Addresses[0]+"/32")))), "the API server's endpoint is open to the VMs")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tn.kc.Name + "-load-balancers"}, &networkingv1.NetworkPolicy{})).To(Succeed())

	// Steady state: a reconcile with nothing due writes nothing.
	touch(ctx, g, tn.kc, "steady")
	g.Consistently(func(g Gomega) string {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, tenantSecretKey, s)).To(Succeed())
		return s.ResourceVersion
	}, 3*time.Second, 200*time.Millisecond).Should(Equal(first.ResourceVersion))

	// A credential minted by a release before the shipped ClusterRoles, a
	// Role of its own and a binding to it, is rebound and the Role removed.
	g.Expect(env.Client.Delete(ctx, binding)).To(Succeed())
	legacy := []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: tenantcloud.Rules(tenantcloud.CloudControllerManager)},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}},
	}
	for _, o := range legacy {
		o.SetAnnotations(map[string]string{infrav1.OwnerAnnotation: ns + "/" + tn.kc.Name})
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	// Until the shipped ClusterRole is there, the working binding stays.
	restoreBoth := uninstallClusterRole(ctx, t, "capkv-tenant-ccm-csi")
	touch(ctx, g, tn.kc, "missing-role")
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 10*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.CredentialFailedReason))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, binding)).To(Succeed())
	g.Expect(binding.RoleRef.Kind).To(Equal("Role"), "the old binding is kept while the new one cannot work")
	restoreBoth()
	touch(ctx, g, tn.kc, "rebind")
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, binding)).To(Succeed())
		return binding.RoleRef.Kind + " " + binding.RoleRef.Name
	}, 10*time.Second).Should(Equal("ClusterRole capkv-tenant-ccm-csi"))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rbacv1.Role{}))).To(BeTrue(), "the old Role is gone")

	// The tenant's components use the kubeconfig as it is: it reaches the
	// infra namespace, and no further.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(first.Data[tenantcloud.KubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	asTenant, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asTenant.List(ctx, &corev1.ServiceList{}, client.InNamespace(ns))).To(Succeed())
	g.Expect(asTenant.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}, client.InNamespace(ns))).To(Succeed())
	g.Expect(apierrors.IsForbidden(asTenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-cluster-kubeconfig"}, &corev1.Secret{}))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(asTenant.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}, client.InNamespace(other)))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(asTenant.List(ctx, &corev1.NodeList{}))).To(BeTrue())

	// Rotation: the provider's clock passes the renewal time. A watcher
	// reads the tenant's Secret all along; it must always be there, with
	// a token the API server accepts.
	var (
		mu     sync.Mutex
		gaps   []string
		stop   = make(chan struct{})
		reads  atomic.Int32
		polled = make(chan struct{})
	)
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			gap := tenantSecretGap(ctx)
			mu.Lock()
			if gap != "" {
				gaps = append(gaps, gap)
			}
			mu.Unlock()
			reads.Add(1)
		}
	}()
	skew.Store(int64(50 * time.Minute))
	// Nothing real wakes the provider at a skewed time: touch the cluster.
	touch(ctx, g, tn.kc, "rotation")
	rotated := &corev1.Secret{}
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, tenantSecretKey, rotated)).To(Succeed())
		return tokenOf(g, rotated)
	}, 30*time.Second).ShouldNot(Equal(token))
	g.Eventually(reads.Load).Should(BeNumerically(">", 5))
	close(stop)
	<-polled
	g.Expect(gaps).To(BeEmpty(), "the tenant's Secret always held a valid token")
	g.Expect(rotated.UID).To(Equal(first.UID), "the Secret is replaced in place")
	g.Expect(authenticates(ctx, g, token)).To(BeTrue(), "the old token stays valid until it expires")
	g.Expect(authenticates(ctx, g, tokenOf(g, rotated))).To(BeTrue())
	g.Eventually(func() time.Time {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), tn.kc)
		return ptr.Deref(tn.kc.Status.TenantCloud.TokenRenewalTime, metav1.Time{}).Time
	}).Should(BeTemporally(">", time.Now().Add(50*time.Minute)))

	// Deleting the cluster removes the ServiceAccount, Role and binding,
	// and with the ServiceAccount every token it had.
	g.Expect(env.Client.Delete(ctx, tn.kc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), &infrav1.KubevirtCluster{}))
	}, 30*time.Second).Should(BeTrue())
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s left behind: %v", obj, name, err)
	}
	g.Eventually(func(g Gomega) bool { return authenticates(ctx, g, tokenOf(g, rotated)) }, 10*time.Second).Should(BeFalse())
	g.Expect(authenticates(ctx, g, token)).To(BeFalse())
}

// TestTenantCloudCredentialExternalInfra mints the credential on an
// external infra cluster, named by a kubeconfig Secret with a namespace of
// its own: no owner references cross clusters there, so the owner
// annotation alone marks what the provider removes.
func TestTenantCloudCredentialExternalInfra(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, manager.Options{WatchFilterValue: "tenantcloud-external", TenantConnectionRetryInterval: time.Second})
	ns, vmNS := newNamespace(t), newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: ns},
		Data:       map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: env.KubeConfig, infrav1.InfraClusterSecretNamespaceKey: []byte(vmNS)},
	})).To(Succeed())
	// An administrator has not installed the shipped ClusterRole on this
	// infra cluster yet: a binding to it would grant nothing.
	restore := uninstallClusterRole(ctx, t, "capkv-tenant-ccm")
	tn := createTenant(t, ns, "tenantcloud-external", func(kc *infrav1.KubevirtCluster) {
		kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", Name: "infra"}
		kc.Spec.TenantCloud.Components = []infrav1.TenantCloudComponent{infrav1.TenantCloudControllerManager}
	}, nil)
	deleteTenantSecret(ctx, t)
	connectTenant(ctx, g, tn)
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.CredentialFailedReason))
	g.Expect(conditions.Get(tn.kc, infrav1.TenantCloudReadyCondition).Message).To(ContainSubstring(
		"ClusterRole capkv-tenant-ccm is not installed on the infra cluster"))
	restore()
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 60*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.CredentialIssuedReason))
	name := tenantcloud.Name(tn.cluster.Name)
	g.Expect(tn.kc.Status.TenantCloud.ServiceAccount).To(Equal(vmNS + "/" + name))

	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.RoleBinding{}} {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: vmNS, Name: name}, obj)).To(Succeed())
		g.Expect(obj.GetOwnerReferences()).To(BeEmpty(), "%T: owner references cannot cross clusters", obj)
		g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue(infrav1.OwnerAnnotation, ns+"/"+tn.kc.Name))
	}
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: vmNS, Name: name}, binding)).To(Succeed())
	g.Expect(binding.RoleRef.Name).To(Equal("capkv-tenant-ccm"), "the CCM's permissions only")

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, tenantSecretKey, secret)).To(Succeed())
	g.Expect(string(secret.Data[tenantcloud.NamespaceKey])).To(Equal(vmNS))
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[tenantcloud.KubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal(strings.TrimSuffix(env.Config.Host, "/")), "the external kubeconfig's server")
	asTenant, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asTenant.List(ctx, &corev1.ServiceList{}, client.InNamespace(vmNS))).To(Succeed())
	g.Expect(apierrors.IsForbidden(asTenant.List(ctx, &corev1.ServiceList{}, client.InNamespace(ns)))).To(BeTrue(),
		"the management namespace is not the VM namespace")

	// Emptying the components removes the credential, in the tenant too.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), tn.kc)).To(Succeed())
	patch := client.MergeFrom(tn.kc.DeepCopy())
	tn.kc.Spec.TenantCloud.Components = nil
	g.Expect(env.Client.Patch(ctx, tn.kc, patch)).To(Succeed())
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.DisabledReason))
	g.Expect(tn.kc.Status.TenantCloud).To(BeZero())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, tenantSecretKey, &corev1.Secret{}))).To(BeTrue(), "the tenant's Secret is gone")
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: vmNS, Name: name}, obj))).To(BeTrue(), "%T left behind", obj)
	}
	g.Eventually(func(g Gomega) bool { return authenticates(ctx, g, tokenOf(g, secret)) }, 10*time.Second).Should(BeFalse())

	// Asked for again, then the cluster is deleted.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), tn.kc)).To(Succeed())
	patch = client.MergeFrom(tn.kc.DeepCopy())
	tn.kc.Spec.TenantCloud.Components = []infrav1.TenantCloudComponent{infrav1.TenantCloudControllerManager}
	g.Expect(env.Client.Patch(ctx, tn.kc, patch)).To(Succeed())
	g.Eventually(condition(tn.kc, infrav1.TenantCloudReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.CredentialIssuedReason))
	g.Expect(env.Client.Get(ctx, tenantSecretKey, secret)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, tn.kc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(tn.kc), &infrav1.KubevirtCluster{}))
	}, 30*time.Second).Should(BeTrue())
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: vmNS, Name: name}, obj))).To(BeTrue(), "%T left behind", obj)
	}
	g.Eventually(func(g Gomega) bool { return authenticates(ctx, g, tokenOf(g, secret)) }, 10*time.Second).Should(BeFalse())
}

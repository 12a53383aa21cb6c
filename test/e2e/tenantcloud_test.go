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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantcloud"
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

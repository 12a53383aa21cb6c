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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	goldenpkg "github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestTenantWrittenGoldenImageStatusHoldsNothing: a tenant allowed to write
// its KubevirtCluster's status names another namespace's golden volume
// there, to keep the collector from deleting it. The provider overwrites
// the field at once (a provisioned cluster names no volume), and the volume
// goes after its retention as if the tenant had written nothing.
func TestTenantWrittenGoldenImageStatusHoldsNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, manager.Options{WatchFilterValue: "golden-status", GoldenImageRetention: 3 * time.Second})
	labels := map[string]string{watchFilterLabel: "golden-status"}

	// The tenant's cluster, provisioned with an endpoint of its own.
	tn, err := fixture.NewTenant(ctx, env.Client, fixture.TenantOptions{Namespace: newNamespace(t), Labels: labels, Owned: true,
		Mutate: func(kc *infrav1.KubevirtCluster) {
			kc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443}
		}})
	g.Expect(err).NotTo(HaveOccurred())
	kc := tn.KubevirtCluster
	g.Eventually(func() bool {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		return ptr.Deref(kc.Status.Initialization.Provisioned, false)
	}, 60*time.Second).Should(BeTrue(), "the tenant's cluster is provisioned")

	// Another namespace's golden volume, imported, whose template is gone.
	victim := newNamespace(t)
	tmpl, _ := goldenTemplate(g, victim, "https://images.example/victim.qcow2", labels)
	golden := *tmpl.Status.GoldenImage
	// The import a machine of the template started, finished.
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: golden.Namespace, Name: golden.Name,
			Labels: map[string]string{goldenpkg.Label: "true", watchFilterLabel: "golden-status"}},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://images.example/victim.qcow2"}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}},
		},
	}
	g.Expect(env.Client.Create(ctx, dv)).To(Succeed())
	finishImport(g, dv)
	g.Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())

	// The tenant claims the volume through its cluster's status.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
	kc.Status.GoldenImage = golden.DeepCopy()
	g.Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())

	g.Eventually(func() *infrav1.GoldenImageStatus {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		return kc.Status.GoldenImage
	}, 10*time.Second).Should(BeNil(), "the provider overwrote the tenant's claim")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(dv), &cdiv1.DataVolume{}))
	}, 30*time.Second).Should(BeTrue(), "the unused volume was collected after its retention")
}

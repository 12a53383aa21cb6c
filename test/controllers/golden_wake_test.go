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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestGoldenImportEndWakesTemplateMachines: a machine cloned from a
// template that already names its golden volume does not save its status
// for the volume (the template is the user the golden image controller
// counts), and holds the status of its wait until it settles. The end of
// the import must still reach it at once. The manager here holds a step's
// status for 10 minutes, and this test plays CDI finishing the import: the
// machine's VM appears within the wait only if the import's end woke it.
// A thousand-machine run, before the template led there, saw 26 control
// planes wait exactly the settle time (2 minutes) for a finished import.
func TestGoldenImportEndWakesTemplateMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, manager.Options{WatchFilterValue: "golden-wake", StatusSettleTime: 10 * time.Minute})
	ns := newNamespace(t)
	labels := map[string]string{watchFilterLabel: "golden-wake"}

	tmpl, spec := goldenTemplate(g, ns, "https://images.example/wake.qcow2", labels)
	golden := tmpl.Status.GoldenImage

	tn, err := fixture.NewTenant(ctx, env.Client, fixture.TenantOptions{Namespace: ns, Labels: labels, Owned: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, km, err := tn.NewMachine(ctx, fixture.MachineOptions{Name: "workers-x7k2p", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec = *spec.DeepCopy()
		km.Annotations = map[string]string{
			clusterv1.TemplateClonedFromNameAnnotation:      tmpl.Name,
			clusterv1.TemplateClonedFromGroupKindAnnotation: infrav1.GroupVersion.WithKind("KubevirtMachineTemplate").GroupKind().String(),
		}
	}})
	g.Expect(err).NotTo(HaveOccurred())

	// The machine starts the import and waits for it, without a VM.
	dv := &cdiv1.DataVolume{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: golden.Namespace, Name: golden.Name}, dv)
	}, 30*time.Second).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	vmExists := func() bool { return env.Client.Get(ctx, client.ObjectKeyFromObject(km), vm) == nil }
	g.Consistently(vmExists, 2*time.Second).Should(BeFalse())

	// CDI finishes the import.
	finishImport(g, dv)

	g.Eventually(vmExists, 30*time.Second).Should(BeTrue(), "the import's end woke the machine")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(km), km)).To(Succeed())
	g.Expect(km.Status.GoldenImage).To(BeNil(), "the machine never saved its status: only the template led the import's end to it")
	g.Expect(ptr.Deref(km.Status.Initialization.Provisioned, false)).To(BeFalse())
}

// goldenTemplate creates a KubevirtMachineTemplate "workers" in ns whose
// root disk is the image at url, and waits for it to name its golden
// volume; spec is its machines' spec.
func goldenTemplate(g Gomega, ns, url string, labels map[string]string) (*infrav1.KubevirtMachineTemplate, infrav1.KubevirtMachineSpec) {
	ctx := context.Background()
	spec := infrav1.KubevirtMachineSpec{
		VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: fixture.SmallVM()},
		RootDisk: &infrav1.RootDiskSpec{
			Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: url}},
			DiskSize: resource.MustParse("20Gi"),
		},
	}
	vmi := &spec.VirtualMachineTemplate.Spec.Template.Spec
	vmi.Volumes, vmi.Domain.Devices.Disks = nil, nil
	tmpl := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns, Labels: labels},
		Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: spec}}}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	g.Eventually(func() *infrav1.GoldenImageStatus {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		return tmpl.Status.GoldenImage
	}, 30*time.Second).ShouldNot(BeNil())
	return tmpl, spec
}

// finishImport plays CDI finishing the import of golden volume dv.
func finishImport(g Gomega, dv *cdiv1.DataVolume) {
	dv.Status.Phase, dv.Status.Progress = cdiv1.Succeeded, "100.0%"
	dv.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady, Status: "True", Reason: "Completed"}}
	g.Expect(env.Client.Status().Update(context.Background(), dv)).To(Succeed())
}

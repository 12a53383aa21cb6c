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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// rootDiskContent is what the volume of a machine's root disk holds.
func rootDiskContent(t *testing.T, ns, machine string) string {
	t.Helper()
	g := NewWithT(t)
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, ns, machine, vm)).To(Succeed())
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == goldenplan.RootDiskName && v.DataVolume != nil {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(infraGet(t, w.Env.Client, ns, v.DataVolume.Name, pvc)).To(Succeed())
			pv := &corev1.PersistentVolume{}
			g.Expect(infraGet(t, w.Env.Client, "", pvc.Spec.VolumeName, pv)).To(Succeed())
			return pv.Annotations[sim.ContentAnnotation]
		}
	}
	t.Fatalf("VM %s/%s has no root disk", ns, machine)
	return ""
}

// TestDataImportCronKeepsTheGoldenImageFresh names a DataSource kept fresh
// by a DataImportCron as the machines' image. CDI's own controllers poll
// the registry (through the simulated poller pod of its CronJob), import
// the digest it serves and point the DataSource at it; when a new build is
// pushed under the same tag, the next poll imports it and moves the
// DataSource: the next machine clones the new build, the running one keeps
// its disk, and CDI collects the outdated import.
func TestDataImportCronKeepsTheGoldenImageFresh(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	image := "docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1"
	firstBuild := w.Sim.Images.Digest(image)
	cron := &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu", Namespace: tc.ns},
		Spec: cdiv1.DataImportCronSpec{
			Schedule: "* * * * *", ManagedDataSource: "ubuntu", ImportsToKeep: ptr.To[int32](1),
			GarbageCollect: ptr.To(cdiv1.DataImportCronGarbageCollectOutdated),
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{
				Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &image}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}},
		}}
	g.Expect(w.Env.Client.Create(ctx, cron)).To(Succeed())
	importOf := func() string {
		ds := &cdiv1.DataSource{}
		if err := infraGet(t, w.Env.Client, tc.ns, "ubuntu", ds); err != nil || ds.Spec.Source.PVC == nil {
			return ""
		}
		return ds.Spec.Source.PVC.Name
	}
	NewWithT(t).Eventually(importOf).WithTimeout(2 * time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())
	firstImport := importOf()

	fromSource := func(name string) *infrav1.KubevirtMachine {
		return tc.newMachine(t, fixture.MachineOptions{Name: name, Mutate: func(km *infrav1.KubevirtMachine) {
			km.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{DataSource: &infrav1.ImageVolumeRef{Name: "ubuntu"}},
				DiskSize: resource.MustParse("20Gi")}
			dropContainerDisk(km)
		}})
	}
	running := fromSource("cron-0")
	eventually(t, tc.provisioned(running)).Should(Succeed())
	g.Expect(rootDiskContent(t, tc.ns, "cron-0")).To(HaveSuffix("@"+firstBuild), "the machine boots the build the registry served")
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "cron-0", vmi)).To(Succeed())

	secondBuild := w.Sim.Images.Push(image)
	g.Expect(secondBuild).NotTo(Equal(firstBuild))
	NewWithT(t).Eventually(importOf).WithTimeout(3*time.Minute).WithPolling(time.Second).
		Should(And(Not(BeEmpty()), Not(Equal(firstImport))), "the next poll imports the new build")
	next := fromSource("cron-1")
	eventually(t, tc.provisioned(next)).Should(Succeed())
	g.Expect(rootDiskContent(t, tc.ns, "cron-1")).To(HaveSuffix("@" + secondBuild))

	g.Expect(rootDiskContent(t, tc.ns, "cron-0")).To(HaveSuffix("@"+firstBuild), "the running machine keeps its disk")
	same := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "cron-0", same)).To(Succeed())
	g.Expect(same.UID).To(Equal(vmi.UID), "the running machine's VM was not restarted")
	g.Expect(tc.provisioned(running)()).To(Succeed())

	eventually(t, func() bool {
		return apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, firstImport, &cdiv1.DataVolume{}))
	}).Should(BeTrue(), "CDI keeps one import and collects the outdated one")
}

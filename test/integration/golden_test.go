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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

const (
	imageA = "https://images.example/ubuntu-24.04-kube-v1.34.1.qcow2"
	imageB = "https://images.example/flatcar-4230-kube-v1.34.1.qcow2"
)

// withImage gives the machine a root disk of image url on class (empty:
// the default class) instead of its container disk.
func withImage(url, class string) func(*infrav1.KubevirtMachine) {
	return func(km *infrav1.KubevirtMachine) {
		km.Spec.RootDisk = &infrav1.RootDiskSpec{
			Image:    infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: url}},
			DiskSize: resource.MustParse("20Gi"),
		}
		if class != "" {
			km.Spec.RootDisk.StorageClassName = ptr.To(class)
		}
		dropContainerDisk(km)
	}
}

func dropContainerDisk(km *infrav1.KubevirtMachine) {
	spec := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec
	spec.Volumes, spec.Domain.Devices.Disks = nil, nil
	spec.Domain.Memory.Guest = ptr.To(resource.MustParse("512Mi"))
}

// counters snapshots the counters of what CDI's simulated pods and CSI
// driver did.
func counters() map[string]int64 {
	out := map[string]int64{}
	for _, n := range []string{sim.Imports, sim.Clones, sim.SmartClones, sim.HostAssistedClones, sim.Snapshots} {
		out[n] = w.Sim.Counters.Get(n)
	}
	return out
}

func delta(before map[string]int64, name string) int64 {
	return w.Sim.Counters.Get(name) - before[name]
}

// storageClass creates a class of the simulated CSI driver with a clone
// strategy annotation (empty: none) and binding mode.
func storageClass(t *testing.T, name, cloneStrategy string, mode storagev1.VolumeBindingMode) string {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: world.Provisioner,
		VolumeBindingMode: &mode, AllowVolumeExpansion: ptr.To(true)}
	if cloneStrategy != "" {
		sc.Annotations = map[string]string{"cdi.kubevirt.io/clone-strategy": cloneStrategy}
	}
	err := w.Env.Client.Create(context.Background(), sc)
	if !apierrors.IsAlreadyExists(err) {
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	return name
}

// TestGoldenImagesOnePerImage creates three MachineDeployments' worth of
// machines, three each, two naming image A and one image B, on four kinds
// of storage: exactly two imports, and nine clones of the kind the storage
// supports (CSI clone, host-assisted copy, snapshot and restore), made by
// CDI's own controllers, each reaching its VM. Three machines per group are
// enough to show six machines in two groups sharing one import; six each
// (2026-11-27) took twice the time and proved nothing more.
func TestGoldenImagesOnePerImage(t *testing.T) {
	const machinesPerImage = 3
	for _, tt := range []struct {
		name, class string
		cloneKind   string
		// method is the clone type CDI records on each root disk claim.
		method string
	}{
		{"smart clones on CSI-clone storage", storageClass(t, "golden-csi", "csi-clone", storagev1.VolumeBindingImmediate), sim.SmartClones, "csi-clone"},
		{"WaitForFirstConsumer storage", world.WFFCClass, sim.HostAssistedClones, "copy"},
		{"host-assisted clones forced by the StorageProfile", storageClass(t, "golden-copy", "copy", storagev1.VolumeBindingImmediate), sim.HostAssistedClones, "copy"},
		{"snapshot clones where the driver takes snapshots", world.SnapshotClass, sim.SmartClones, "snapshot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Each kind in a namespace of its own, counted there. With
			// one processor per test process (testenv) the testing
			// package runs parallel tests one at a time unless given
			// -test.parallel; all four at once made the CPU-bound run
			// slower (docs/testing.md).
			t.Parallel()
			g := NewWithT(t)
			tc := newTenantCluster(t, nil)
			count := func(name string) int64 { return w.Sim.Counters.GetIn(tc.ns, name) }
			var kms []*infrav1.KubevirtMachine
			for md, image := range []string{imageA, imageA, imageB} {
				for i := range machinesPerImage {
					kms = append(kms, tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("md-%d-%d", md, i), Mutate: withImage(image, tt.class)}))
				}
			}
			for _, km := range kms {
				NewWithT(t).Eventually(tc.provisioned(km)).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
			}
			g.Expect(count(sim.Imports)).To(BeEquivalentTo(2), "one import per image")
			g.Expect(count(sim.Clones)).To(BeEquivalentTo(3*machinesPerImage), "one clone per machine")
			g.Expect(count(tt.cloneKind)).To(BeEquivalentTo(3 * machinesPerImage))
			claims := &corev1.PersistentVolumeClaimList{}
			g.Expect(w.Env.Client.List(context.Background(), claims, client.InNamespace(tc.ns))).To(Succeed())
			methods := map[string]int{}
			for _, claim := range claims.Items {
				if strings.HasSuffix(claim.Name, "-"+goldenplan.RootDiskName) {
					methods[claim.Annotations["cdi.kubevirt.io/cloneType"]]++
				}
			}
			g.Expect(methods).To(Equal(map[string]int{tt.method: 3 * machinesPerImage}), "CDI's clone method, per root disk")
			if tt.method == "snapshot" {
				g.Expect(count(sim.Snapshots)).To(BeNumerically(">=", 3*machinesPerImage), "a snapshot per clone")
			}
			goldens := &cdiv1.DataVolumeList{}
			g.Expect(w.Env.Client.List(context.Background(), goldens, client.InNamespace(tc.ns), client.HasLabels{goldenplan.Label})).To(Succeed())
			g.Expect(goldens.Items).To(HaveLen(2))

			// Once every machine is gone and the retention has passed, no
			// golden volume is left.
			for _, km := range kms {
				g.Expect(w.Env.Client.Delete(context.Background(), km)).To(Succeed())
			}
			NewWithT(t).Eventually(func() int {
				l := &cdiv1.DataVolumeList{}
				_ = w.Env.Client.List(context.Background(), l, client.InNamespace(tc.ns), client.HasLabels{goldenplan.Label})
				return len(l.Items)
			}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(BeZero())
		})
	}
}

// TestGoldenImageWaitAndFailedImport starts 20 machines on an image whose
// server cannot be reached: one import, retried by CDI, its error on every
// machine, and no VM.
func TestGoldenImageWaitAndFailedImport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	var kms []*infrav1.KubevirtMachine
	for i := range 20 {
		kms = append(kms, tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("bad-%d", i), Mutate: withImage("https://unreachable.example/image.qcow2", "")}))
	}
	for _, km := range kms {
		eventually(t, func() string { return condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition) }).
			Should(And(HavePrefix("False/"+infrav1.WaitingForGoldenImageReason), ContainSubstring("Unable to connect"), ContainSubstring("restarted")))
	}
	// No VM is created without its disk.
	NewWithT(t).Consistently(func() int { return list(t, tc.ns, &kubevirtv1.VirtualMachineList{}) }).WithTimeout(2 * time.Second).Should(BeZero())
	g.Expect(list(t, tc.ns, &cdiv1.DataVolumeList{})).To(Equal(1), "one import for the twenty machines")
	created := 0
	for _, km := range kms {
		for _, reason := range machineEvents(t, tc, km) {
			if reason == "GoldenImageCreated" {
				created++
			}
		}
	}
	g.Expect(created).To(Equal(1), "only the machine that created the golden volume says so, however many tried at once")

	// Deleting the machines stops the retries: the failed golden volume goes
	// with its last user.
	for _, km := range kms {
		g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	}
	eventually(t, func() int { return list(t, tc.ns, &cdiv1.DataVolumeList{}) }).Should(BeZero())
}

func TestGoldenImageDeletedByHandAndRollover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	first := tc.newMachine(t, fixture.MachineOptions{Name: "roll-0", Mutate: withImage(imageA, "")})
	eventually(t, tc.provisioned(first)).Should(Succeed())
	goldenA := get(t, tc.c, first).Status.GoldenImage
	g.Expect(goldenA).NotTo(BeNil())

	// Deleted by hand: running VMs keep their own disks; the next machine
	// imports the image again.
	before := counters()
	g.Expect(w.Env.Client.Delete(ctx, &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: goldenA.Namespace, Name: goldenA.Name}})).To(Succeed())
	second := tc.newMachine(t, fixture.MachineOptions{Name: "roll-1", Mutate: withImage(imageA, "")})
	eventually(t, tc.provisioned(second)).Should(Succeed())
	g.Expect(delta(before, sim.Imports)).To(BeEquivalentTo(1))
	g.Expect(tc.provisioned(first)()).To(Succeed(), "the running machine is unaffected")

	// A new image: a new golden volume; the old one stays while it has
	// users and goes a retention after its last one.
	third := tc.newMachine(t, fixture.MachineOptions{Name: "roll-2", Mutate: withImage(imageB, "")})
	eventually(t, tc.provisioned(third)).Should(Succeed())
	goldenB := get(t, tc.c, third).Status.GoldenImage
	g.Expect(goldenB.Name).NotTo(Equal(goldenA.Name))
	exists := func(s *infrav1.GoldenImageStatus) func() bool {
		return func() bool {
			return w.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &cdiv1.DataVolume{}) == nil
		}
	}
	g.Expect(w.Env.Client.Delete(ctx, first)).To(Succeed())
	NewWithT(t).Consistently(exists(goldenA)).WithTimeout(goldenRetention+time.Second).Should(BeTrue(), "roll-1 still uses image A")
	g.Expect(w.Env.Client.Delete(ctx, second)).To(Succeed())
	eventually(t, exists(goldenA)).Should(BeFalse())
	g.Expect(exists(goldenB)()).To(BeTrue())
	g.Expect(w.Env.Client.Delete(ctx, third)).To(Succeed())
	eventually(t, exists(goldenB)).Should(BeFalse())
}

func TestGoldenImageTemplateKeepsItInUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "tmpl-0", Mutate: withImage(imageA, "")})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	ref := get(t, tc.c, km).Status.GoldenImage
	tmpl := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: tc.ns},
		Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: get(t, tc.c, km).Spec}}}
	tmpl.Spec.Template.Spec.ProviderID = nil
	g.Expect(w.Env.Client.Create(ctx, tmpl)).To(Succeed())
	eventually(t, func() *infrav1.GoldenImageStatus { return get(t, tc.c, tmpl).Status.GoldenImage }).Should(Equal(ref))
	g.Expect(w.Env.Client.Delete(ctx, km)).To(Succeed())
	NewWithT(t).Consistently(func() error {
		return w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &cdiv1.DataVolume{})
	}).WithTimeout(goldenRetention+2*time.Second).Should(Succeed(), "the template still uses it")
	g.Expect(w.Env.Client.Delete(ctx, tmpl)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &cdiv1.DataVolume{}))
	}).Should(BeTrue())
}

// seedVolume imports image A into a DataVolume of the admin's, as one would
// pre-seed an image.
func seedVolume(t *testing.T, ns, name string) *cdiv1.DataVolume {
	t.Helper()
	seed := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: imageA}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}}
	NewWithT(t).Expect(w.Env.Client.Create(context.Background(), seed)).To(Succeed())
	return seed
}

// TestAdminProvidedImages clones from a PVC and a DataSource the admin made;
// neither is ever deleted, and no golden volume is made for them.
func TestAdminProvidedImages(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	seed := seedVolume(t, tc.ns, "ubuntu-seed")
	g.Expect(w.Env.Client.Create(ctx, &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu", Namespace: tc.ns},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: tc.ns, Name: "ubuntu-seed"}}}})).To(Succeed())
	before := counters()
	fromPVC := tc.newMachine(t, fixture.MachineOptions{Name: "admin-pvc", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Name: "ubuntu-seed"}}, DiskSize: resource.MustParse("20Gi")}
		dropContainerDisk(km)
	}})
	fromDS := tc.newMachine(t, fixture.MachineOptions{Name: "admin-ds", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{DataSource: &infrav1.ImageVolumeRef{Name: "ubuntu"}}, DiskSize: resource.MustParse("20Gi")}
		dropContainerDisk(km)
	}})
	eventually(t, tc.provisioned(fromPVC)).Should(Succeed())
	eventually(t, tc.provisioned(fromDS)).Should(Succeed())
	g.Expect(delta(before, sim.Clones)).To(BeEquivalentTo(2))
	g.Expect(get(t, tc.c, fromPVC).Status.GoldenImage).To(BeNil())
	g.Expect(w.Env.Client.Delete(ctx, fromPVC)).To(Succeed())
	g.Expect(w.Env.Client.Delete(ctx, fromDS)).To(Succeed())
	eventually(t, func() int { return list(t, tc.ns, &infrav1.KubevirtMachineList{}) }).Should(BeZero())
	NewWithT(t).Consistently(func() error { return w.Env.Client.Get(ctx, client.ObjectKeyFromObject(seed), &cdiv1.DataVolume{}) }).
		WithTimeout(goldenRetention + time.Second).Should(Succeed())
}

func TestPerVMImportAndDataDisks(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	before := counters()
	var kms []*infrav1.KubevirtMachine
	for i := range 2 {
		kms = append(kms, tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("import-%d", i), Mutate: func(km *infrav1.KubevirtMachine) {
			withImage(imageA, "")(km)
			km.Spec.RootDisk.CloneStrategy = infrav1.CloneStrategyPerVMImport
			km.Spec.DataDisks = []infrav1.DataDiskSpec{{Name: "containerd", DiskSize: resource.MustParse("50Gi")}}
		}}))
	}
	for _, km := range kms {
		eventually(t, tc.provisioned(km)).Should(Succeed())
	}
	g.Expect(delta(before, sim.Imports)).To(BeEquivalentTo(2))
	g.Expect(delta(before, sim.Clones)).To(BeZero())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "import-0", vm)).To(Succeed())
	disks := vm.Spec.Template.Spec.Domain.Devices.Disks
	g.Expect(disks[0].Name).To(Equal(goldenplan.RootDiskName), "the root disk boots first")
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "import-0-containerd", &cdiv1.DataVolume{})).To(Succeed())
	g.Expect(get(t, tc.c, kms[0]).Status.GoldenImage).To(BeNil())
}

// TestCrossNamespaceCloneNeedsRBAC clones an admin PVC from a shared images
// namespace: without RBAC for the VM's service account the machine says
// what to grant; once granted, it proceeds.
func TestCrossNamespaceCloneNeedsRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	images := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "images-"}}
	g.Expect(w.Env.Client.Create(ctx, images)).To(Succeed())
	seedVolume(t, images.Name, "ubuntu")
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "shared-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Namespace: images.Name, Name: "ubuntu"}},
			DiskSize: resource.MustParse("20Gi")}
		dropContainerDisk(km)
	}})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.CloneNotAuthorizedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("datavolumes/source"))

	g.Expect(w.Env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "clone-source", Namespace: images.Name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}}}})).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenants-clone", Namespace: images.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "clone-source"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: tc.ns, Name: "default"}}})).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
}

// TestGoldenImageSizeMismatch: a machine whose disk is smaller than the
// shared golden volume says so instead of creating a VM CDI cannot clone.
func TestGoldenImageSizeMismatch(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	big := tc.newMachine(t, fixture.MachineOptions{Name: "big-0", Mutate: withImage(imageA, "")})
	eventually(t, tc.provisioned(big)).Should(Succeed())
	small := tc.newMachine(t, fixture.MachineOptions{Name: "small-0", Mutate: func(km *infrav1.KubevirtMachine) {
		withImage(imageA, "")(km)
		km.Spec.RootDisk.DiskSize = resource.MustParse("10Gi")
	}})
	eventually(t, tc.reason(small, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.GoldenImageFailedReason))
	g.Expect(condition(get(t, tc.c, small), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("imageSize"))
	g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, "small-0", &kubevirtv1.VirtualMachine{}))).To(BeTrue())
	g.Expect(w.Env.Client.Delete(context.Background(), small)).To(Succeed())
}

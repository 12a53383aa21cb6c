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
	"fmt"
	"os"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var w *world.World

func TestMain(m *testing.M) {
	world.QuietLogs()
	var err error
	w, err = world.Start(world.Options{WithCAPI: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		// A component that lost its lease under load and waited out its
		// back-off explains a wait that timed out.
		fmt.Fprintf(os.Stderr, "world components that exited and were started again: %q\n", w.ComponentExits())
	}
	if err := w.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func namespace(t *testing.T) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sim-"}}
	NewWithT(t).Expect(w.Env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// vm is a small VM with a container disk on the pod network.
func vm(ns, name string, mutate func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
	mem := resource.MustParse("1Gi")
	v := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fidelity"}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &mem},
						Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}}},
					Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
						ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/ubuntu:22.04"}}}},
				},
			},
		},
	}
	if mutate != nil {
		mutate(v)
	}
	return v
}

func vmiOf(g Gomega, v *kubevirtv1.VirtualMachine) func() *kubevirtv1.VirtualMachineInstance {
	return func() *kubevirtv1.VirtualMachineInstance {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := w.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(v), vmi); err != nil {
			return nil
		}
		return vmi
	}
}

func phase(p kubevirtv1.VirtualMachineInstancePhase) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(v *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineInstancePhase {
		return v.Status.Phase
	}, Equal(p)))
}

// runVM creates v and waits until its VM instance runs, and returns that
// instance: most tests start from a running VM.
func runVM(g Gomega, v *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
	g.ExpectWithOffset(1, w.Env.Client.Create(context.Background(), v)).To(Succeed())
	g.EventuallyWithOffset(1, vmiOf(g, v), 60*time.Second).Should(phase(kubevirtv1.Running))
	return vmiOf(g, v)()
}

// patchKubeVirt patches the KubeVirt CR of c for the rest of the test, as
// the docs tell a platform engineer to, and puts it back when the test
// ends.
func patchKubeVirt(t *testing.T, c client.Client, patches ...string) {
	t.Helper()
	ctx := context.Background()
	restore, err := testenv.PatchKubeVirt(ctx, c, patches...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(ctx); err != nil {
			t.Error(err)
		}
	})
}

// TestVirtAPIRefusesBadVMs checks the world's real virt-api is wired in as
// KubeVirt installs it: its webhook refuses bad VMs with KubeVirt's own
// reasons (the provider's agreement with it is test/webhooks'
// TestAdmissionAgreesWithVirtAPI).
func TestVirtAPIRefusesBadVMs(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cases := map[string]struct {
		mutate func(*kubevirtv1.VirtualMachine)
		reason string
	}{
		"running and runStrategy": {func(v *kubevirtv1.VirtualMachine) { v.Spec.Running = ptr.To(true) }, "mutually exclusive"},
		"no run strategy":         {func(v *kubevirtv1.VirtualMachine) { v.Spec.RunStrategy = nil }, "RunStrategy must be specified"},
		"disk without volume": {func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.Devices.Disks = append(v.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "data"})
		}, "'data' not found"},
		"unused DataVolume template": {func(v *kubevirtv1.VirtualMachine) {
			v.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
				Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{}}}}
		}, "must be referenced in the VMI template's 'volumes' list"},
	}
	for name, tc := range cases {
		err := w.Env.Client.Create(context.Background(), vm(ns, strings.ReplaceAll(strings.ToLower(name), " ", "-"), tc.mutate))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
		g.Expect(err.Error()).To(ContainSubstring(`admission webhook "virtualmachine-validator.kubevirt.io" denied the request`), name)
		g.Expect(err.Error()).To(ContainSubstring(tc.reason), name)
	}
	// A volume without a disk is not refused; virt-controller adds the disk.
	ok := vm(ns, "volume-without-disk", func(v *kubevirtv1.VirtualMachine) { v.Spec.Template.Spec.Domain.Devices.Disks = nil })
	g.Expect(w.Env.Client.Create(context.Background(), ok)).To(Succeed())
	g.Eventually(vmiOf(g, ok), 30*time.Second).Should(phase(kubevirtv1.Running))
	g.Expect(vmiOf(g, ok)().Spec.Domain.Devices.Disks).To(HaveLen(1))
}

func nodesOf(g Gomega, ns string, names ...string) func() []string {
	return func() []string {
		var nodes []string
		for _, n := range names {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := w.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, vmi); err != nil || vmi.Status.Phase != kubevirtv1.Running {
				return nil
			}
			nodes = append(nodes, vmi.Status.NodeName)
		}
		return nodes
	}
}

// TestSchedulingByTheRealScheduler checks virt-launcher pods carry the VMI's
// placement rules to the real kube-scheduler: required node affinity, and
// topology spread with maxSkew 1 over three nodes.
func TestSchedulingByTheRealScheduler(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	var affine []string
	for i := range 3 {
		name := fmt.Sprintf("affine-%d", i)
		affine = append(affine, name)
		g.Expect(w.Env.Client.Create(context.Background(), vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}},
				}}}}}
		}))).To(Succeed())
	}
	g.Eventually(nodesOf(g, ns, affine...), 60*time.Second).Should(HaveEach("infra-b"))

	var spread []string
	for i := range 6 {
		name := fmt.Sprintf("spread-%d", i)
		spread = append(spread, name)
		g.Expect(w.Env.Client.Create(context.Background(), vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.ObjectMeta.Labels = map[string]string{"spread": "yes"}
			v.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "yes"}},
			}}
		}))).To(Succeed())
	}
	g.Eventually(nodesOf(g, ns, spread...), 60*time.Second).Should(HaveLen(6))
	perNode := map[string]int{}
	for _, n := range nodesOf(g, ns, spread...)() {
		perNode[n]++
	}
	g.Expect(perNode).To(Equal(map[string]int{"infra-a": 2, "infra-b": 2, "infra-c": 2}))
}

// TestGuestBootstrap checks a valid cloud-config boots and joins, and that an
// invalid one, or kubeadm missing from the image, leaves a running VM that
// never joins.
func TestGuestBootstrap(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	withUserData := func(name, data string, image func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-userdata", Namespace: ns}, Data: map[string][]byte{"userdata": []byte(data)}}
		g.Expect(w.Env.Client.Create(context.Background(), secret)).To(Succeed())
		v := vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
			if image != nil {
				image(v)
			}
			v.Spec.Template.Spec.Volumes = append(v.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{
				CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: secret.Name}}}})
		})
		g.Expect(w.Env.Client.Create(context.Background(), v)).To(Succeed())
		return v
	}
	good := withUserData("good", "#cloud-config\nruncmd:\n- kubeadm join\n", withKubernetesImage)
	bad := withUserData("bad", "#cloud-config\nruncmd: [unclosed\n", withKubernetesImage)
	// vm's stock Ubuntu image carries no Kubernetes: kubeadm is missing
	// unless the data installs it.
	stock := withUserData("stock", "#cloud-config\nruncmd:\n- kubeadm join\n", nil)
	installs := withUserData("installs", "#cloud-config\nruncmd:\n"+
		"- echo 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /' > /etc/apt/sources.list.d/kubernetes.list\n"+
		"- apt-get update && apt-get install -y containerd kubelet=1.34.1-1.1 kubeadm=1.34.1-1.1\n- kubeadm join\n", nil)
	guest := func(v *kubevirtv1.VirtualMachine) func() string {
		return func() string {
			vmi := vmiOf(g, v)()
			if vmi == nil {
				return ""
			}
			return vmi.Annotations[sim.GuestAnnotation]
		}
	}
	g.Eventually(guest(good), 30*time.Second).Should(Equal("joined"))
	g.Eventually(guest(bad), 30*time.Second).Should(HavePrefix("bootstrap-failed: cloud-config is not valid YAML"))
	g.Expect(vmiOf(g, bad)()).To(phase(kubevirtv1.Running), "a guest with bad data still runs")
	g.Eventually(guest(stock), 30*time.Second).Should(HavePrefix("bootstrap-failed: kubeadm: command not found"))
	g.Expect(vmiOf(g, stock)()).To(phase(kubevirtv1.Running), "a guest without kubeadm still runs")
	g.Expect(vmiOf(g, stock)().Status.Conditions).NotTo(ContainElement(HaveField("Type", kubevirtv1.VirtualMachineInstanceAgentConnected)),
		"the stock image has no guest agent")
	g.Eventually(guest(installs), 30*time.Second).Should(Equal("joined"), "the data installs kubeadm and a runtime")
}

// withKubernetesImage boots a VM from an image-builder image with
// Kubernetes v1.34.1.
func withKubernetesImage(v *kubevirtv1.VirtualMachine) {
	v.Spec.Template.Spec.Volumes[0].ContainerDisk.Image = "quay.io/capk/ubuntu-2404-container-disk:v1.34.1"
}

func dataVolume(ns, name string, storageClass string, source *cdiv1.DataVolumeSource) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cdiv1.DataVolumeSpec{Source: source, Storage: &cdiv1.StorageSpec{StorageClassName: &storageClass,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}},
	}
}

func dvPhase(g Gomega, dv *cdiv1.DataVolume) func() cdiv1.DataVolumePhase {
	return func() cdiv1.DataVolumePhase {
		got := &cdiv1.DataVolume{}
		if err := w.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(dv), got); err != nil {
			return ""
		}
		return got.Status.Phase
	}
}

// TestDeletedVMTakesItsDataVolumes checks a VM's DataVolumes go with it
// through the real garbage collector, and that a WaitForFirstConsumer disk
// binds once the VM's pod is scheduled.
func TestDeletedVMTakesItsDataVolumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := vm(ns, "with-disk", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "with-disk-root"},
			Spec: dataVolume(ns, "", world.WFFCClass, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}).Spec}}
		v.Spec.Template.Spec.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "with-disk-root"}}
	})
	runVM(g, v)
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "with-disk-root", Namespace: ns}}
	g.Eventually(dvPhase(g, dv), 30*time.Second).Should(Equal(cdiv1.Succeeded))

	g.Expect(w.Env.Client.Delete(ctx, v)).To(Succeed())
	gone := func(obj client.Object) func() bool {
		return func() bool { return apierrors.IsNotFound(w.Env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
	}
	g.Eventually(gone(dv), 60*time.Second).Should(BeTrue(), "the garbage collector did not delete the DataVolume")
	g.Eventually(gone(&corev1.PersistentVolumeClaim{ObjectMeta: dv.ObjectMeta}), 60*time.Second).Should(BeTrue())
	g.Eventually(gone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: ns}}), 60*time.Second).Should(BeTrue())
}

// TestDeletedLauncherPodRestartsVM checks a launcher pod deleted under a
// running VM ends its guest, and the real virt-controller starts the VM
// again in a new VM instance, as run strategy Always says.
func TestDeletedLauncherPodRestartsVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	v := vm(ns, "restarted", nil)
	first := runVM(g, v)
	pods := &corev1.PodList{}
	g.Expect(w.Env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(first.UID)})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(w.Env.Client.Delete(ctx, &pods.Items[0])).To(Succeed())
	g.Eventually(func() bool {
		again := vmiOf(g, v)()
		return again != nil && again.UID != first.UID && again.Status.Phase == kubevirtv1.Running
	}, 60*time.Second).Should(BeTrue(), "the VM did not run again in a new VM instance")
	g.Eventually(func() error {
		return w.Env.Client.Get(ctx, client.ObjectKeyFromObject(&pods.Items[0]), &corev1.Pod{})
	}, 30*time.Second).Should(Satisfy(apierrors.IsNotFound), "the old launcher pod was not removed")
}

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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// The gpu flavor's cluster: its workers run on two tainted device nodes
// with three GPUs between them, one of which another tenant's VM holds.
const (
	gpuCluster    = "gpu"
	gpuDeployment = gpuCluster + "-md-0"
	// gpuDevices is how many GPUs the device nodes have in all.
	gpuDevices = 3
)

// gpuNodes are the device nodes, tainted as platforms taint theirs
// (docs/gpus.md), and their GPUs.
var gpuNodes = map[string]int64{"infra-gpu-1": 2, "infra-gpu-2": 1}

// gpuTaint keeps VMs that ask for no GPU off the device nodes.
var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// applyGPUCluster readies the infra cluster for GPU machines as
// docs/gpus.md tells a platform engineer to (KubeVirt permits the GPU
// model; the device nodes advertise it), starts another tenant's VM on one
// of the GPUs, and applies the gpu flavor with two workers. It returns the
// cluster's namespace and the other tenant's VM. The device nodes and
// KubeVirt's permission stay for the rest of the world's life: the reaper
// deletes the cluster after its spec, and the nodes' taint keeps every
// other VM off them, the provider's spread included (docs/placement.md).
func applyGPUCluster(ctx context.Context) (string, *kubevirtv1.VirtualMachine) {
	GinkgoHelper()
	_, err := testenv.PatchKubeVirt(ctx, w.Infra.Client, testenv.PermittedGPUPatch)
	Expect(err).NotTo(HaveOccurred())
	for name, gpus := range gpuNodes {
		Expect(sim.CreateNodes(ctx, w.Infra.Client, sim.NodeSpec{
			Name: name, Zone: "zone-gpu", CPU: "16", Memory: "64Gi", Taints: []corev1.Taint{gpuTaint},
			Devices: map[corev1.ResourceName]int64{testenv.GPUResource: gpus},
		})).To(Succeed())
	}
	other := gpuVM(newNamespace(ctx, "e2e-gpu-other-"), "training")
	Expect(w.Infra.Client.Create(ctx, other)).To(Succeed())
	// It takes its GPU before the cluster's workers ask for theirs.
	Eventually(func() kubevirtv1.VirtualMachineInstancePhase {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		_ = w.Infra.Client.Get(ctx, client.ObjectKeyFromObject(other), vmi)
		return vmi.Status.Phase
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(kubevirtv1.Running))
	ns := newNamespace(ctx, "e2e-gpu-")
	applyGenerated(ctx, ns, nil, "generate", "cluster", gpuCluster, "--flavor", "gpu",
		"--infrastructure", "kubevirt:"+suite.ReleaseVersion, "--worker-machine-count", "2")
	return ns, other
}

// gpuVM is another tenant's VM with one GPU of the world's model.
func gpuVM(ns, name string) *kubevirtv1.VirtualMachine {
	mem := resource.MustParse("1Gi")
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &mem}, Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{{Name: "root"}},
					GPUs:  []kubevirtv1.GPU{{Name: "gpu0", DeviceName: testenv.GPUResource}},
				}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/ubuntu:24.04"}}}},
				Tolerations: []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpExists}},
			}},
		},
	}
}

// expectGPUWorkers checks the gpu flavor's cluster from its two workers on
// the device nodes, through a rollout while every GPU is taken, to a third
// worker that waits for a GPU and comes up once one is freed.
func expectGPUWorkers(ctx context.Context, ns string, other *kubevirtv1.VirtualMachine) {
	expectRunning(ctx, ns, gpuCluster)
	expectDeploymentNodes(ctx, ns, gpuDeployment, 2)
	By("the workers run on the device nodes, and their template counts the GPU for the autoscaler")
	Expect(gpuWorkerNodes(ctx, ns)).To(HaveEach(BeKeyOf(gpuNodes)))
	kmt := &infrav1.KubevirtMachineTemplate{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: gpuDeployment}, kmt)).To(Succeed())
	Expect(kmt.Status.Capacity).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resource.MustParse("1")))

	By("a rollout, with every GPU taken, replaces each worker before making the next")
	old := map[types.UID]bool{}
	for _, m := range deploymentMachines(ctx, ns) {
		old[m.UID] = true
	}
	rollWorkers(ctx, ns, gpuDeployment, "rolled", func(spec *infrav1.KubevirtMachineSpec) {
		spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"rollout": "2"}
	})
	// The other tenant holds the third GPU. With a surge, the first new
	// worker would wait for a GPU that only a worker it replaces could
	// free, and the rollout would never end.
	most := 0
	Eventually(func() string {
		stale, live, withNode := 0, 0, 0
		machines := deploymentMachines(ctx, ns)
		for _, m := range machines {
			if old[m.UID] {
				stale++
			}
			if m.DeletionTimestamp.IsZero() {
				live++
			}
			if m.Status.NodeRef.IsDefined() {
				withNode++
			}
		}
		most = max(most, live)
		return fmt.Sprintf("%d machines, %d old, %d with a Node", len(machines), stale, withNode)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("2 machines, 0 old, 2 with a Node"), func() string { return describe(ctx, ns) })
	Expect(most).To(BeNumerically("<=", 2), "the rollout never asked for a worker more than the two it replaces")
	Expect(gpuWorkerNodes(ctx, ns)).To(And(HaveLen(2), HaveEach(BeKeyOf(gpuNodes))))

	By("a third worker finds no GPU free: it waits, naming the device and how many are free")
	scaleDeployment(ctx, ns, gpuDeployment, 3)
	var waiting infrav1.KubevirtMachine
	Eventually(func(g Gomega) {
		var found []infrav1.KubevirtMachine
		for _, km := range kubevirtMachines(ctx, ns) {
			if cond := meta.FindStatusCondition(km.Status.Conditions, infrav1.VirtualMachineReadyCondition); cond != nil &&
				cond.Reason == infrav1.InsufficientDevicesReason {
				g.Expect(cond.Message).To(ContainSubstring(fmt.Sprintf("1 %s (0 of %d free on %d infra nodes)", testenv.GPUResource, gpuDevices, len(gpuNodes))))
				found = append(found, km)
			}
		}
		g.Expect(found).To(HaveLen(1))
		waiting = found[0]
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
	vm := &kubevirtv1.VirtualMachine{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: waiting.Name}, vm)).To(Succeed())

	By("freeing the other tenant's GPU brings it up: the same VM, not a new one")
	Expect(w.Infra.Client.Delete(ctx, other)).To(Succeed())
	expectDeploymentNodes(ctx, ns, gpuDeployment, 3)
	after := &kubevirtv1.VirtualMachine{}
	Expect(w.Infra.Client.Get(ctx, client.ObjectKeyFromObject(vm), after)).To(Succeed())
	Expect(after.UID).To(Equal(vm.UID))
	Expect(gpuWorkerNodes(ctx, ns)).To(And(HaveLen(3), HaveEach(BeKeyOf(gpuNodes))))
	deleteClusterLater(ctx, ns, gpuCluster)
}

// deploymentMachines are the GPU MachineDeployment's Machines.
func deploymentMachines(ctx context.Context, ns string) []clusterv1.Machine {
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: gpuDeployment})).To(Succeed())
	return machines.Items
}

// gpuWorkerNodes are the infra nodes the GPU workers' VM instances run on,
// one entry per running instance.
func gpuWorkerNodes(ctx context.Context, ns string) []string {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	Expect(w.Infra.Client.List(ctx, vmis, client.InNamespace(ns))).To(Succeed())
	var nodes []string
	for _, vmi := range vmis.Items {
		if len(vmi.Spec.Domain.Devices.GPUs) > 0 && vmi.Status.Phase == kubevirtv1.Running {
			nodes = append(nodes, vmi.Status.NodeName)
		}
	}
	return nodes
}

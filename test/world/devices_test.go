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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// gpuTaint keeps other VMs off the GPU node, as platforms taint theirs.
var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// addGPUNode adds an infra node with one GPU of the world's model for the
// rest of the test. It is tainted, so that no other test's VM lands there.
func addGPUNode(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(sim.CreateNodes(ctx, w.Env.Client, sim.NodeSpec{
		Name: name, Zone: "zone-gpu", CPU: "16", Memory: "64Gi",
		Taints:  []corev1.Taint{gpuTaint},
		Devices: map[corev1.ResourceName]int64{testenv.GPUResource: 1},
	})).To(Succeed())
	t.Cleanup(func() {
		// Once no launcher pod runs there, as a node is drained first.
		g.Eventually(func() []string {
			pods := &corev1.PodList{}
			g.Expect(w.Env.Client.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
			var left []string
			for _, p := range pods.Items {
				if p.Spec.NodeName == name && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
					left = append(left, p.Name)
				}
			}
			return left
		}, 60*time.Second).Should(BeEmpty(), "launcher pods left on %s", name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := w.Env.Client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
}

// gpuVM asks for one GPU of the world's model and tolerates the GPU taint.
func gpuVM(ns, name string) *kubevirtv1.VirtualMachine {
	return vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "gpu0", DeviceName: testenv.GPUResource}}
		v.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpExists}}
	})
}

// TestGPUsPlacedByTheSchedulerAndAdmittedByTheKubelet checks the world
// counts devices as a real cluster does: virt-controller asks for a
// permitted GPU in the launcher pod, the real scheduler places it only
// where one is free and leaves the next one Pending, and the simulated
// kubelet refuses a pod bound past the scheduler onto a node whose GPU is
// taken, as a real kubelet's device manager does.
func TestGPUsPlacedByTheSchedulerAndAdmittedByTheKubelet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	patchKubeVirt(t, w.Env.Client, testenv.PermittedGPUPatch)
	addGPUNode(t, "infra-gpu")

	first, second := gpuVM(ns, "gpu-first"), gpuVM(ns, "gpu-second")
	t.Cleanup(func() {
		for _, v := range []*kubevirtv1.VirtualMachine{first, second} {
			_ = w.Env.Client.Delete(ctx, v)
		}
	})
	vmi := runVM(g, first)
	g.Expect(vmi.Status.NodeName).To(Equal("infra-gpu"))

	g.Expect(w.Env.Client.Create(ctx, second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(w.Env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
		var messages []string
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					messages = append(messages, c.Message)
				}
			}
		}
		g.Expect(messages).To(ContainElement(ContainSubstring("Insufficient " + testenv.GPUResource)))
	}, 60*time.Second).Should(Succeed(), "the second GPU VM's launcher pod was not left unschedulable")

	// A pod bound straight to the node, as a racing binder would, is
	// refused at admission: the node's one GPU is held. It ends Failed, so
	// it holds no device and leaves the node.
	limits := corev1.ResourceList{testenv.GPUResource: resource.MustParse("1")}
	bound := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bound-past-the-scheduler", Labels: map[string]string{kubevirtv1.AppLabel: "virt-launcher"}},
		Spec: corev1.PodSpec{
			NodeName:    "infra-gpu",
			Tolerations: []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "compute", Image: "quay.io/kubevirt/virt-launcher",
				Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits}}},
		},
	}
	g.Expect(w.Env.Client.Create(ctx, bound)).To(Succeed())
	g.Eventually(func() (corev1.PodStatus, error) {
		err := w.Env.Client.Get(ctx, client.ObjectKeyFromObject(bound), bound)
		return bound.Status, err
	}, 30*time.Second).Should(And(
		HaveField("Phase", corev1.PodFailed),
		HaveField("Reason", sim.UnexpectedAdmissionError),
		HaveField("Message", ContainSubstring("devices unavailable for "+testenv.GPUResource+". Requested: 1, Available: 0")),
	))

	// Freeing the GPU lets the second VM run there.
	g.Expect(w.Env.Client.Delete(ctx, first)).To(Succeed())
	g.Eventually(vmiOf(g, second), 60*time.Second).Should(phase(kubevirtv1.Running))
	g.Expect(vmiOf(g, second)().Status.NodeName).To(Equal("infra-gpu"))
	g.Eventually(func() error {
		return w.Env.Client.Get(ctx, client.ObjectKeyFromObject(first), &kubevirtv1.VirtualMachine{})
	}, 30*time.Second).Should(Satisfy(apierrors.IsNotFound))
}

// TestHardSpreadLeavesTaintedDeviceNodesOut checks the provider's spread
// constraint against the real scheduler with a tainted GPU node beside
// the three plain ones: the GPU node, which the VMs do not tolerate, is no
// domain of the spread, so six VMs spread hard over hosts run two to a
// node. Counted as a domain, as the scheduler counts every node unless
// told to honour taints, the empty GPU node would leave every VM after the
// third Pending.
func TestHardSpreadLeavesTaintedDeviceNodesOut(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	addGPUNode(t, "infra-gpu")
	group := &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "hard"}}
	spread, ok := vmbuilder.SpreadConstraint(infrav1.TopologySpreadSpec{Policy: infrav1.SpreadHard}, group)
	g.Expect(ok).To(BeTrue())
	var names []string
	for i := range 6 {
		name := fmt.Sprintf("spread-%d", i)
		names = append(names, name)
		g.Expect(w.Env.Client.Create(context.Background(), vm(ns, name, func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.ObjectMeta.Labels = group.MatchLabels
			v.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{spread}
		}))).To(Succeed())
	}
	g.Eventually(nodesOf(g, ns, names...), 60*time.Second).Should(HaveLen(6))
	perNode := map[string]int{}
	for _, n := range nodesOf(g, ns, names...)() {
		perNode[n]++
	}
	g.Expect(perNode).To(Equal(map[string]int{"infra-a": 2, "infra-b": 2, "infra-c": 2}))
}

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
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("The demo cluster from the default flavor", Ordered, func() {
	var ns string
	ctx := context.Background()

	BeforeAll(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-demo-"}}
		Expect(c.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		if cc == nil {
			Expect(world.ApplyClusterTemplate(ctx, c, map[string]string{"CLUSTER_NAME": "demo", "NAMESPACE": ns,
				"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "3"})).To(Succeed())
			return
		}
		manifests, err := cc.Run(ctx, "generate", "cluster", "demo", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns,
			"--control-plane-machine-count", "3", "--worker-machine-count", "3")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, c, []byte(manifests))).To(Succeed())
	})

	It("gets 3 ready control-plane machines and 3 workers with Nodes, from one golden image import", func() {
		kcp := &controlplanev1.KubeadmControlPlane{}
		Eventually(func() string {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-control-plane"}, kcp); err != nil {
				return err.Error()
			}
			return fmt.Sprintf("%d/%d ready", ptr.Deref(kcp.Status.ReadyReplicas, 0), ptr.Deref(kcp.Spec.Replicas, 0))
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("3/3 ready"), func() string {
			return describe(ctx, ns)
		})
		md := &clusterv1.MachineDeployment{}
		Eventually(func() int32 {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md-0"}, md); err != nil {
				return -1
			}
			return ptr.Deref(md.Status.ReadyReplicas, 0)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(BeEquivalentTo(3))
		machines := &clusterv1.MachineList{}
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(HaveLen(6))
		for _, m := range machines.Items {
			Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no NodeRef", m.Name)
		}
		Expect(goldenVolumes(ctx, ns)).To(Equal(1), "every root disk is cloned from one golden volume")
		kc := &infrav1.KubevirtCluster{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, kc)).To(Succeed())
		Expect(kc.Annotations).To(HaveKeyWithValue(movable.BlockAnnotation, movable.BlockedLocalInfra),
			"its VMs run on the management cluster: clusterctl move must not start")
	})

	It("scales the workers 3 -> 8 -> 1, its leader crashed once and stopped 4 times during the scale-up: the standby takes over", func() {
		scaleWorkers(ctx, ns, 8)
		vmCount := func() int {
			vms := &kubevirtv1.VirtualMachineList{}
			Expect(c.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			return len(vms.Items)
		}
		if w != nil {
			for i := range 5 {
				before := vmCount()
				// A crashed leader keeps the Lease until it expires; a
				// stopped one gives it up, and the standby takes it at its
				// next try. The crash comes first, while the machines are
				// being created.
				crash := i == 0
				h := stopLeader(ctx, crash)
				GinkgoWriter.Printf("crash %t: the Lease moved %s after the stop (released: %t, taken %s after)\n",
					crash, h.total.Round(10*time.Millisecond), h.released, h.afterRelease.Round(10*time.Millisecond))
				Expect(h.total).To(BeNumerically("<", maxHandover), "a new leader within the lease duration plus 5 s")
				Expect(h.released).To(Equal(!crash), "a stop gives the Lease up; a crash cannot")
				if !crash {
					Expect(h.afterRelease).To(BeNumerically("<", maxAfterRelease), "the standby takes a released Lease at its next try")
				}
				// The next stop comes once the new leader made progress.
				Eventually(func() bool { n := vmCount(); return n > before || n == 3+8 }).
					WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeTrue(), func() string { return describe(ctx, ns) })
			}
		}
		expectWorkers(ctx, ns, 8)
		vms := &kubevirtv1.VirtualMachineList{}
		Expect(c.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
		Expect(vms.Items).To(HaveLen(3+8), "one VM per machine, no duplicates")
		scaleWorkers(ctx, ns, 1)
		expectWorkers(ctx, ns, 1)
		Eventually(func(g Gomega) int {
			g.Expect(c.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			return len(vms.Items)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(3 + 1))
	})

	It("rolls the workers to a new image: a new golden volume, old VMs replaced", func() {
		old := workerNames(ctx, ns)
		tmpl := &infrav1.KubevirtMachineTemplate{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md-0"}, tmpl)).To(Succeed())
		next := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md-0-v2"}, Spec: tmpl.Spec}
		// The same Kubernetes version on Ubuntu 22.04: another image.
		image := next.Spec.Template.Spec.RootDisk.Image.Registry
		image.URL = strings.Replace(image.URL, "ubuntu-2404", "ubuntu-2204", 1)
		Expect(c.Create(ctx, next)).To(Succeed())
		Expect(retryWrite(func() error {
			md := &clusterv1.MachineDeployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md-0"}, md); err != nil {
				return err
			}
			md.Spec.Template.Spec.InfrastructureRef.Name = next.Name
			return c.Update(ctx, md)
		})).To(Succeed())
		Eventually(func() []string { return workerNames(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(SatisfyAll(HaveLen(1), Not(ContainElements(old))), func() string { return describe(ctx, ns) })
		expectWorkers(ctx, ns, 1)
		Expect(goldenVolumes(ctx, ns)).To(Equal(2), "the new image is imported once")
		Eventually(func(g Gomega) int {
			vms := &kubevirtv1.VirtualMachineList{}
			g.Expect(c.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			return len(vms.Items)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(3+1), "the old worker's VM is gone")
	})

	It("remediates a worker whose VM was deleted behind the provider's back", func() {
		// The flavor's MachineHealthCheck watches the Nodes; this one also
		// acts on the provider's verdict that the VM is gone for good.
		patchHealthCheck(ctx, ns, "demo-md-0", func(mhc *clusterv1.MachineHealthCheck) {
			mhc.Spec.Checks.UnhealthyMachineConditions = []clusterv1.UnhealthyMachineCondition{{
				Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](5)}}
		})
		old := workerNames(ctx, ns)
		Expect(old).To(HaveLen(1))
		Expect(c.Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old[0]}})).To(Succeed())
		Eventually(func() []string { return workerNames(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(SatisfyAll(HaveLen(1), Not(ContainElements(old))), func() string { return describe(ctx, ns) })
		// The check above also fails a machine still provisioning after 5s
		// (Cluster API checks machine conditions before the Node): back to
		// the flavor's checks before the replacement provisions, or it would
		// be replaced in turn, now or in the next spec.
		patchHealthCheck(ctx, ns, "demo-md-0", func(mhc *clusterv1.MachineHealthCheck) {
			mhc.Spec.Checks.UnhealthyMachineConditions = nil
		})
		expectWorkers(ctx, ns, 1)
	})

	It("restarts the VM of an unhealthy worker instead of replacing it, and replaces it when restarts do not help", func() {
		if w == nil {
			Skip("a tenant Node can only be made unhealthy in the simulated world")
		}
		// The default flavor ships the restart-first template, off; switched
		// on as docs/remediation.md says, with a test-sized timeout.
		tmpl := &infrav1.KubevirtRemediationTemplate{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-restart-first"}, tmpl)).To(Succeed())
		Expect(tmpl.Spec.Template.Spec).To(Equal(infrav1.KubevirtRemediationSpec{RetryLimit: 1, TimeoutSeconds: 300}), "the flavor's defaults")
		setRemediationTimeout(ctx, tmpl, 60)
		patchHealthCheck(ctx, ns, "demo-md-0", func(mhc *clusterv1.MachineHealthCheck) {
			mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{
				APIVersion: infrav1.GroupVersion.String(), Kind: "KubevirtRemediationTemplate", Name: tmpl.Name}
			for i := range mhc.Spec.Checks.UnhealthyNodeConditions {
				mhc.Spec.Checks.UnhealthyNodeConditions[i].TimeoutSeconds = ptr.To[int32](5)
			}
		})
		DeferCleanup(func() {
			patchHealthCheck(ctx, ns, "demo-md-0", func(mhc *clusterv1.MachineHealthCheck) {
				mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{}
			})
		})
		expectWorkers(ctx, ns, 1)
		names := workerNames(ctx, ns)
		Expect(names).To(HaveLen(1))
		worker := &clusterv1.Machine{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[0]}, worker)).To(Succeed())
		before := vmOf(ctx, ns, worker.Spec.InfrastructureRef.Name).UID
		remediation := client.ObjectKey{Namespace: ns, Name: worker.Name}

		By("a guest that stopped answering is restarted: the same Machine, a new VM instance, a Ready Node again")
		Expect(w.Workloads.NodeLost(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, worker.Status.NodeRef.Name)).To(Succeed())
		Eventually(func() error { return c.Get(ctx, remediation, &infrav1.KubevirtRemediation{}) }).
			WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), "the MachineHealthCheck creates the remediation")
		Eventually(func() bool {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: worker.Spec.InfrastructureRef.Name}, vmi) == nil &&
				vmi.UID != before && vmi.Status.Phase == kubevirtv1.Running
		}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), func() string { return describe(ctx, ns) })
		Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, remediation, &infrav1.KubevirtRemediation{})) }).
			WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), "the MachineHealthCheck finds the Machine healthy and deletes the remediation")
		Expect(workerNames(ctx, ns)).To(Equal([]string{worker.Name}))
		expectWorkers(ctx, ns, 1)

		By("a worker the restart does not cure goes back to its MachineSet, which replaces it")
		setRemediationTimeout(ctx, tmpl, 5)
		Expect(retryWrite(func() error {
			m := &clusterv1.Machine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(worker), m); err != nil {
				return err
			}
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[clusterv1.RemediateMachineAnnotation] = ""
			return c.Update(ctx, m)
		})).To(Succeed())
		Eventually(func() []string { return workerNames(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(SatisfyAll(HaveLen(1), Not(ContainElement(worker.Name))), func() string { return describe(ctx, ns) })
		expectWorkers(ctx, ns, 1)
		Expect(remediationEventReasons(ctx, ns, worker.Name)).To(ContainElements(
			infrav1.RestartedVirtualMachineReason, infrav1.RetryLimitReachedReason))
	})

	It("replaces the machines of an infra node that dies, and the control plane keeps its quorum", func() {
		if w == nil {
			Skip("an infra node can only be failed in the simulated world")
		}
		scaleWorkers(ctx, ns, 2)
		expectWorkers(ctx, ns, 2)
		// The flavor's health checks, with a test-sized timeout.
		for _, name := range []string{"demo-md-0", "demo-control-plane"} {
			patchHealthCheck(ctx, ns, name, func(mhc *clusterv1.MachineHealthCheck) {
				for i := range mhc.Spec.Checks.UnhealthyNodeConditions {
					mhc.Spec.Checks.UnhealthyNodeConditions[i].TimeoutSeconds = ptr.To[int32](10)
				}
			})
		}
		machines := &clusterv1.MachineList{}
		Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "demo-md-0"})).To(Succeed())
		node := vmOf(ctx, ns, machines.Items[0].Spec.InfrastructureRef.Name).Status.NodeName
		var lost []string
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		for _, m := range machines.Items {
			if vmOf(ctx, ns, m.Spec.InfrastructureRef.Name).Status.NodeName == node {
				lost = append(lost, m.Name)
			}
		}
		Expect(w.Sim.FailNode(ctx, node)).To(Succeed())
		DeferCleanup(func() { Expect(w.Sim.RecoverNode(ctx, node)).To(Succeed()) })

		fewestReady := 3
		Eventually(func(g Gomega) error {
			g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			readyCP, replaced := 0, 0
			for _, m := range machines.Items {
				_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
				nodeReady := m.DeletionTimestamp.IsZero() && conditions.IsTrue(&m, clusterv1.MachineNodeReadyCondition)
				if cp && nodeReady {
					readyCP++
				}
				if nodeReady && !slices.Contains(lost, m.Name) {
					replaced++
				}
			}
			fewestReady = min(fewestReady, readyCP)
			if readyCP != 3 || replaced != 5 {
				return fmt.Errorf("%d/3 control-plane machines and %d/5 machines off %s ready", readyCP, replaced, node)
			}
			return nil
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
		Expect(fewestReady).To(BeNumerically(">=", 2), "never more than one control-plane machine down: etcd kept its quorum")
		for _, name := range lost {
			Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Machine{})).NotTo(Succeed(), "machine %s on the dead node was replaced", name)
		}
	})

	It("deletes everything of the cluster", func() {
		Expect(c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}})).To(Succeed())
		for _, list := range []client.ObjectList{
			&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &infrav1.KubevirtMachineList{}, &infrav1.KubevirtClusterList{},
			&kubevirtv1.VirtualMachineList{}, &kubevirtv1.VirtualMachineInstanceList{}, &cdiv1.DataVolumeList{},
			&corev1.SecretList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{},
		} {
			Eventually(func(g Gomega) int {
				g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				return meta.LenList(list)
			}).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero(), "%T left in %s:\n%s", list, ns, describe(ctx, ns))
		}
	})
})

// workerNames lists the worker machines not being deleted.
func workerNames(ctx context.Context, ns string) []string {
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "demo-md-0"})).To(Succeed())
	var names []string
	for _, m := range machines.Items {
		if m.DeletionTimestamp.IsZero() {
			names = append(names, m.Name)
		}
	}
	return names
}

// scaleWorkers sets the MachineDeployment's replicas.
func scaleWorkers(ctx context.Context, ns string, n int32) { scaleDeployment(ctx, ns, "demo-md-0", n) }

// expectWorkers waits for exactly n worker machines, all ready with Nodes.
func expectWorkers(ctx context.Context, ns string, n int) {
	expectDeploymentNodes(ctx, ns, "demo-md-0", n)
}

// remediationEventReasons lists the reasons of the Events recorded on the
// KubevirtRemediations of a name, also after they are gone.
func remediationEventReasons(ctx context.Context, ns, name string) []string {
	events := &eventsv1.EventList{}
	Expect(c.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "KubevirtRemediation" && e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// vmOf reads the VM instance of a machine.
func vmOf(ctx context.Context, ns, name string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi)).To(Succeed())
	return vmi
}

// setRemediationTimeout sets how long a restarted machine may stay
// unhealthy in a KubevirtRemediationTemplate.
func setRemediationTimeout(ctx context.Context, tmpl *infrav1.KubevirtRemediationTemplate, seconds int32) {
	GinkgoHelper()
	Expect(retryWrite(func() error {
		t := &infrav1.KubevirtRemediationTemplate{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tmpl), t); err != nil {
			return err
		}
		t.Spec.Template.Spec.TimeoutSeconds = seconds
		return c.Update(ctx, t)
	})).To(Succeed())
}

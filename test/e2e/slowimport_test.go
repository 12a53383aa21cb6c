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
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
)

// A golden image that downloads for longer than the flavor's
// MachineHealthCheck gives a machine to get its Node: the health check
// counts from the machine's creation, so a control-plane machine created
// before its image is there would be replaced again and again. The
// provider holds the cluster unprovisioned until the image is imported, so
// Cluster API creates the first control-plane machine only then
// (docs/golden-images.md).
var _ = Describe("a golden image slower than the health check's node startup timeout", func() {
	ctx := context.Background()

	It("creates the first control-plane machine only once the image is imported, and it is never replaced", func() {
		if w == nil {
			Skip("needs the sandbox world's simulated CDI")
		}
		const importTime, nodeStartupTimeout = 60 * time.Second, 40 * time.Second
		ns := newNamespace(ctx, "e2e-slow-import-")
		w.Sim.SetImportTime(ns, importTime)
		DeferCleanup(func() { w.Sim.SetImportTime(ns, 0) })
		applyGenerated(ctx, ns, map[string]string{"CAPKV_NODE_STARTUP_TIMEOUT_SECONDS": strconv.Itoa(int(nodeStartupTimeout.Seconds()))},
			"generate", "cluster", "slow", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "--worker-machine-count", "0")

		By("the cluster waits for the control plane's golden image, and no Machine exists meanwhile")
		kc := &infrav1.KubevirtCluster{}
		Eventually(func() string {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "slow"}, kc); err != nil {
				return err.Error()
			}
			cond := conditions.Get(kc, infrav1.ControlPlaneImageReadyCondition)
			if cond == nil {
				return "no condition"
			}
			return string(cond.Status) + "/" + cond.Reason
		}).WithTimeout(importTime / 2).WithPolling(time.Second).Should(Equal("False/" + infrav1.WaitingForGoldenImageReason))
		machines := &clusterv1.MachineList{}
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(BeEmpty())

		By("the first control-plane machine is created after the import and keeps its place until its Node comes")
		var first types.UID
		Eventually(func() int {
			Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			return len(machines.Items)
		}).WithTimeout(timeout).WithPolling(time.Second).ShouldNot(BeZero(), func() string { return describe(ctx, ns) })
		first = machines.Items[0].UID
		expectRunning(ctx, ns, "slow")
		expectMachinesWithNodes(ctx, ns, 1)
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(HaveLen(1))
		Expect(machines.Items[0].UID).To(Equal(first), "the health check replaced the first control-plane machine")

		volumes := goldenDataVolumes(ctx, ns)
		Expect(volumes).To(HaveLen(1))
		var imported time.Time
		for _, cond := range volumes[0].Status.Conditions {
			if cond.Type == cdiv1.DataVolumeReady && cond.Status == corev1.ConditionTrue {
				imported = cond.LastTransitionTime.Time
			}
		}
		Expect(imported).NotTo(BeZero())
		// Both times have whole seconds.
		Expect(machines.Items[0].CreationTimestamp.Time).To(BeTemporally(">=", imported.Add(-time.Second)),
			"the machine was created while the golden image was still importing")
		Expect(imported.Sub(volumes[0].CreationTimestamp.Time)).To(BeNumerically(">", nodeStartupTimeout),
			"the import took longer than the health check's node startup timeout")
		deleteClusterLater(ctx, ns, "slow")
	})
})

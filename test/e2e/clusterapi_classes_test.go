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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// Cluster API's ClusterClass spec (clusterapi_test.go has the harness). It
// runs in the e2e suite's second shard.

// ClusterClass changes: a rebase onto a class with another worker label, a
// new control-plane template, new worker bootstrap and infrastructure
// templates, a rebase onto a copy of the class in another namespace, the
// same changes there, then the workers' topology removed. Each template
// change replaces machines, so the provider's own check afterwards is that
// none of them left a VM or a root disk behind.
var _ = Describe("Cluster API's ClusterClass changes", func() {
	ctx := context.Background()
	var namespace string
	JustAfterEach(func() {
		if namespace == "" || CurrentSpecReport().Failed() {
			return
		}
		By("every replaced machine took its VM and root disk with it")
		expectNothingLeftBehind(ctx, namespace)
	})
	capie2e.ClusterClassChangesSpec(ctx, func() capie2e.ClusterClassChangesSpecInput {
		h := capiSpecs()
		return capie2e.ClusterClassChangesSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			Flavor:                "topology",
			// Fields a user changes without meaning to change a machine's
			// VM: kubeadm's log level, and a label on the workers' VMs.
			ModifyControlPlaneFields: map[string]any{"spec.kubeadmConfigSpec.verbosity": int64(4)},
			ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{
				"spec.template.spec.verbosity": int64(4),
			},
			ModifyMachineDeploymentInfrastructureMachineTemplateFields: map[string]any{
				"spec.template.spec.virtualMachineTemplate.metadata.labels.e2e-class-change": "yes",
			},
			SkipCleanup:          true,
			PostNamespaceCreated: cleanUpLater(func(_ framework.ClusterProxy, ns string) { namespace = ns }),
		}
	})
})

// expectNothingLeftBehind waits until the infra namespace holds a VM for
// each KubevirtMachine and nothing else, and no root disk without its VM:
// every machine a rollout replaced took its VM and disk with it.
func expectNothingLeftBehind(ctx context.Context, ns string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var machines []string
		for _, km := range kubevirtMachines(ctx, ns) {
			machines = append(machines, km.Name)
		}
		vms := &kubevirtv1.VirtualMachineList{}
		g.Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, vm := range vms.Items {
			names = append(names, vm.Name)
		}
		g.Expect(names).To(ConsistOf(machines), "a VM for each KubevirtMachine, no other")
		dvs := &cdiv1.DataVolumeList{}
		g.Expect(w.Infra.Client.List(ctx, dvs, client.InNamespace(ns))).To(Succeed())
		for _, dv := range dvs.Items {
			if _, isGolden := dv.Labels[goldenplan.Label]; isGolden {
				continue
			}
			owners := dv.OwnerReferences
			g.Expect(slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool {
				return o.Kind == "VirtualMachine" && slices.Contains(names, o.Name)
			})).To(BeTrue(), fmt.Sprintf("DataVolume %s belongs to a VM that still exists (owners %v)", dv.Name, owners))
		}
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
}

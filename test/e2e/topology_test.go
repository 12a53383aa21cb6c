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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// ClusterClass kubevirt's own checks, run on the cluster of Cluster API's
// quick start with ClusterClass (clusterapi_test.go): the spec creates the
// cluster from the topology flavor, as a user would, and these check what
// the class makes of it on the infra cluster, then change its variables and
// rebase it onto a second version of the class.

const (
	// topologyRepository and topologyVersion make the class's image
	// reference: the repository tagged with the cluster's version. The
	// repository is the class cluster's own, so that the world's import
	// count is this cluster's alone.
	topologyRepository = "images.example.com/topology-first"
	topologyVersion    = capiKubernetesVersion
)

// topologyVariables are the clusterctl variables of the class cluster.
var topologyVariables = map[string]string{"CAPKV_NODE_IMAGE_REPOSITORY": "docker://" + topologyRepository}

// addTopologyImages puts the class cluster's image repository into the
// world's registry, its images carrying Kubernetes as image-builder's do.
func addTopologyImages() {
	w.Sim.Images.AddVersioned(topologyRepository, sim.Image{OS: "Ubuntu 24.04", Reads: "cloud-init", Runtime: true, GuestAgent: true})
}

// classChecks checks the running class cluster ns/name, then rolls it
// through a variable change and a rebase, counting CDI's imports in ns
// (those of other specs' clusters, still being deleted, count in theirs).
// The cluster has a control-plane machine and a
// worker: each change then replaces two machines, which shows what more
// would, in less time.
func classChecks(ctx context.Context, ns, name string) {
	By("the class's defaults reach the infra cluster, and clusterctl describe shows the provider's conditions")
	_, kms := expectRunningDescribed(ctx, ns, name)
	Expect(kms).To(HaveLen(2), "a control-plane machine and a worker")
	expectMachinesWithNodes(ctx, ns, 2)
	expectCNIApplied(ctx, ns, name)
	kc := kubevirtClusterOf(ctx, ns, name)
	Expect(kc.Spec.ControlPlaneServiceTemplate.Spec.Type).To(BeEquivalentTo("LoadBalancer"), "the controlPlaneEndpoint variable's default")
	Expect(kc.Spec.Isolation.Mode).To(Equal(infrav1.IsolationEnabled), "the isolation variable's default")
	for _, km := range kms {
		Expect(km.Spec.RootDisk.Image.Registry.URL).To(Equal("docker://"+topologyRepository+":"+topologyVersion), "the repository tagged with the version")
		Expect(km.Spec.VirtualMachineTemplate.Spec.Template.Spec.EvictionStrategy).To(HaveValue(BeEquivalentTo("External")))
	}
	Expect(w.Sim.Counters.GetIn(ns, sim.Imports)).To(BeEquivalentTo(1), "two machines, one image, one import")
	kept := topologyUIDs(ctx, ns)

	By("changing the image and machine variables rolls every machine to new templates, recreating nothing else")
	before := machineUIDs(ctx, ns)
	cpTemplate, mdTemplate := infraTemplates(ctx, ns, name)
	updateTopology(ctx, ns, name, func(t *clusterv1.Topology) {
		setVariable(t, "image", `{"http":{"url":"https://images.example.com/topology-second-kube-v1.34.1.qcow2"}}`)
		setVariable(t, "machine", `{"cpu":3,"memory":"4Gi"}`)
	})
	Eventually(func() string {
		cp, md := infraTemplates(ctx, ns, name)
		return fmt.Sprintf("control plane on a new template: %t, workers on a new template: %t", cp != cpTemplate, md != mdTemplate)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("control plane on a new template: true, workers on a new template: true"))
	expectAllReplaced(ctx, ns, before, 2)
	cpTemplate, mdTemplate = infraTemplates(ctx, ns, name)
	for _, tmplName := range []string{cpTemplate, mdTemplate} {
		tmpl := &infrav1.KubevirtMachineTemplate{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tmplName}, tmpl)).To(Succeed())
		Expect(tmpl.Generation).To(BeEquivalentTo(1), "the provider's templates are replaced, never changed")
		Expect(tmpl.Spec.Template.Spec.RootDisk.Image.HTTP.URL).To(Equal("https://images.example.com/topology-second-kube-v1.34.1.qcow2"))
	}
	for _, km := range kubevirtMachines(ctx, ns) {
		vm := &kubevirtv1.VirtualMachine{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vm)).To(Succeed())
		cpu := vm.Spec.Template.Spec.Domain.CPU
		Expect([]uint32{cpu.Sockets, cpu.MaxSockets}).To(Equal([]uint32{3, 12}), "VM %s: 3 sockets, up to four times that", vm.Name)
	}
	Expect(topologyUIDs(ctx, ns)).To(Equal(kept), "the KubevirtCluster, control plane and MachineDeployment stay")
	Expect(w.Sim.Counters.GetIn(ns, sim.Imports)).To(BeEquivalentTo(2), "two machines on a second image, one more import")

	By("rebasing onto a second version of the class, whose VMs carry a label, rolls the machines again")
	const v2 = "-v2"
	generated, err := cc.RunWithVariables(ctx, topologyVariables,
		"generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--flavor", "topology")
	Expect(err).NotTo(HaveOccurred())
	Expect(generated).To(ContainSubstring("kind: ClusterClass"), "clusterctl adds the class the cluster names")
	Expect(world.ApplyYAMLWith(ctx, c, []byte(generated), func(u *unstructured.Unstructured) error {
		switch u.GetKind() {
		case "Cluster":
			return world.ErrSkipObject
		case "ClusterClass":
			renameTemplateRefs(u.Object, v2)
		case "KubevirtMachineTemplate":
			if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"example.com/class": "kubevirt" + v2},
				"spec", "template", "spec", "virtualMachineTemplate", "metadata", "labels"); err != nil {
				return err
			}
		}
		u.SetName(u.GetName() + v2)
		return nil
	})).To(Succeed())
	Eventually(func(g Gomega) bool {
		cc := &clusterv1.ClusterClass{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubevirt" + v2}, cc)).To(Succeed())
		return cc.Status.ObservedGeneration == cc.Generation && conditions.IsTrue(cc, clusterv1.ClusterClassVariablesReadyCondition)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), "the second class is reconciled")
	before = machineUIDs(ctx, ns)
	updateTopology(ctx, ns, name, func(t *clusterv1.Topology) { t.ClassRef.Name = "kubevirt" + v2 })
	expectAllReplaced(ctx, ns, before, 2)
	for _, km := range kubevirtMachines(ctx, ns) {
		vm := &kubevirtv1.VirtualMachine{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vm)).To(Succeed())
		Expect(vm.Labels).To(HaveKeyWithValue("example.com/class", "kubevirt"+v2), "VM %s is built from the second class", vm.Name)
	}
	Expect(topologyUIDs(ctx, ns)).To(Equal(kept), "the KubevirtCluster, control plane and MachineDeployment stay")
	expectRunning(ctx, ns, name)
}

// renameTemplateRefs appends suffix to every template a ClusterClass names.
func renameTemplateRefs(obj map[string]any, suffix string) {
	for k, v := range obj {
		switch v := v.(type) {
		case map[string]any:
			if k == "templateRef" {
				v["name"] = fmt.Sprint(v["name"]) + suffix
			}
			renameTemplateRefs(v, suffix)
		case []any:
			for _, item := range v {
				if m, ok := item.(map[string]any); ok {
					renameTemplateRefs(m, suffix)
				}
			}
		}
	}
}

// setVariable sets a topology variable to a JSON value.
func setVariable(t *clusterv1.Topology, name, value string) {
	for i := range t.Variables {
		if t.Variables[i].Name == name {
			t.Variables[i].Value.Raw = []byte(value)
			return
		}
	}
	v := clusterv1.ClusterVariable{Name: name}
	v.Value.Raw = []byte(value)
	t.Variables = append(t.Variables, v)
}

// infraTemplates are the KubevirtMachineTemplates the control plane and
// the first MachineDeployment use now.
func infraTemplates(ctx context.Context, ns, name string) (controlPlane, workers string) {
	kcps := &controlplanev1.KubeadmControlPlaneList{}
	Expect(c.List(ctx, kcps, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	Expect(kcps.Items).To(HaveLen(1))
	mds := &clusterv1.MachineDeploymentList{}
	Expect(c.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	Expect(mds.Items).To(HaveLen(1))
	return kcps.Items[0].Spec.MachineTemplate.Spec.InfrastructureRef.Name, mds.Items[0].Spec.Template.Spec.InfrastructureRef.Name
}

// topologyUIDs are the UIDs of the objects the topology controller must
// keep across template changes and rebases.
func topologyUIDs(ctx context.Context, ns string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, list := range []client.ObjectList{&infrav1.KubevirtClusterList{}, &controlplanev1.KubeadmControlPlaneList{}, &clusterv1.MachineDeploymentList{}} {
		Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(meta.EachListItem(list, func(item runtime.Object) error {
			o := item.(client.Object)
			out[fmt.Sprintf("%T %s", o, o.GetName())] = o.GetUID()
			return nil
		})).To(Succeed())
	}
	return out
}

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

package webhooks_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// The keys the cluster autoscaler's Cluster API provider reads on a
// MachineDeployment to scale it from zero, and the label it knows a GPU
// Node by, as its documentation gives them
// (kubernetes/autoscaler cluster-autoscaler/cloudprovider/clusterapi/README.md,
// "Scale from zero support" and "Special note on GPU instances").
const (
	autoscalerGPUCount   = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	autoscalerGPUType    = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	autoscalerLabels     = "capacity.cluster-autoscaler.kubernetes.io/labels"
	autoscalerTaints     = "capacity.cluster-autoscaler.kubernetes.io/taints"
	autoscalerAccelLabel = "cluster-api/accelerator"
)

// TestGPUFlavorDescribesItsWorkersToTheAutoscaler reads the gpu flavor's
// MachineDeployment with the autoscaler's documented keys and checks they
// say what a worker will be: the GPUs its template's status.capacity will
// count, the accelerator label and the taints its kubelet registers with.
// It also checks the rollout is delete-first and a worker waiting for a GPU
// is not replaced by its health check.
func TestGPUFlavorDescribesItsWorkersToTheAutoscaler(t *testing.T) {
	g := NewWithT(t)
	objs := renderAndDryRun(t, testenv.FlavorTemplate("gpu"), documentedVariables(t))
	byKind := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		byKind[u.GetKind()+"/"+u.GetName()] = u
	}
	md := byKind["MachineDeployment/blue-md-0"]
	g.Expect(md).NotTo(BeNil())
	infraName, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "infrastructureRef", "name")
	configName, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")

	kmt := &infrav1.KubevirtMachineTemplate{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(byKind["KubevirtMachineTemplate/"+infraName].Object, kmt)).To(Succeed())
	res := capacity.FromVirtualMachine(&kmt.Spec.Template.Spec.VirtualMachineTemplate.Spec, capacity.Sources{})
	g.Expect(res.Known()).To(BeTrue(), res.Message)

	annotations := md.GetAnnotations()
	gpuType := annotations[autoscalerGPUType]
	count, err := resource.ParseQuantity(annotations[autoscalerGPUCount])
	g.Expect(err).NotTo(HaveOccurred(), "%s: %q", autoscalerGPUCount, annotations[autoscalerGPUCount])
	g.Expect(res.Capacity).To(HaveKey(BeEquivalentTo(gpuType)), "the template's capacity counts the GPUs under %s's resource", autoscalerGPUType)
	want := res.Capacity[capacity.GPUResource(kmt.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.GPUs[0].DeviceName)]
	g.Expect(count.Cmp(want)).To(BeZero(), "%s says %s, the template has %s", autoscalerGPUCount, count.String(), want.String())

	config := byKind["KubeadmConfigTemplate/"+configName]
	g.Expect(config).NotTo(BeNil())
	registration := []string{"spec", "template", "spec", "joinConfiguration", "nodeRegistration"}
	args, _, _ := unstructured.NestedSlice(config.Object, append(registration, "kubeletExtraArgs")...)
	var nodeLabels string
	for _, a := range args {
		if a.(map[string]any)["name"] == "node-labels" {
			nodeLabels = a.(map[string]any)["value"].(string)
		}
	}
	g.Expect(nodeLabels).To(HavePrefix(autoscalerAccelLabel+"="), "the kubelet labels a GPU Node from its start")
	g.Expect(strings.Split(annotations[autoscalerLabels], ",")).To(ContainElement(nodeLabels), "the autoscaler expects the label the kubelet sets")

	taints, _, _ := unstructured.NestedSlice(config.Object, append(registration, "taints")...)
	var registered []string
	for _, tt := range taints {
		m := tt.(map[string]any)
		registered = append(registered, fmt.Sprintf("%s=%s:%s", m["key"], m["value"], m["effect"]))
	}
	g.Expect(strings.Split(annotations[autoscalerTaints], ",")).To(ConsistOf(registered), "the autoscaler expects the taints the kubelet registers")

	surge, _, _ := unstructured.NestedFieldNoCopy(md.Object, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
	g.Expect(surge).To(BeEquivalentTo(0), "a rollout deletes a worker before it makes one")
	mhc := byKind["MachineHealthCheck/blue-md-0"]
	g.Expect(mhc).NotTo(BeNil())
	startup, _, _ := unstructured.NestedFieldNoCopy(mhc.Object, "spec", "checks", "nodeStartupTimeoutSeconds")
	g.Expect(startup).To(BeEquivalentTo(0), "a worker waiting for a GPU is not replaced")
}

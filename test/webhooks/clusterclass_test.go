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
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster/patches/inline"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// classTemplate is one template of the ClusterClass, where the topology
// controller would use it.
type classTemplate struct {
	kind   string
	name   string
	holder runtimehooksv1.HolderReference
	// mdClass is the MachineDeployment class for worker templates.
	mdClass string
	// mpClass is the MachinePool class for pool templates.
	mpClass string
}

// TestClusterClassPatches applies ClusterClass kubevirt's patches with
// Cluster API's own inline patch generator to its templates, for the
// defaulted variables and for every variable set, as the topology
// controller would, and checks that the API server and the provider's
// webhooks accept every patched template and that each variable lands
// where docs/flavors.md says.
func TestClusterClassPatches(t *testing.T) {
	class, templates := readClusterClass(t)
	md := func(fieldPath string) runtimehooksv1.HolderReference {
		return runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: "md-0", FieldPath: fieldPath}
	}
	roles := []classTemplate{
		{kind: "KubevirtClusterTemplate", name: "kubevirt", holder: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "blue", FieldPath: "spec.infrastructureRef"}},
		{kind: "KubeadmControlPlaneTemplate", name: "kubevirt-control-plane", holder: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "blue", FieldPath: "spec.controlPlaneRef"}},
		{kind: "KubevirtMachineTemplate", name: "kubevirt-control-plane", holder: runtimehooksv1.HolderReference{APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlane", Name: "blue", FieldPath: "spec.machineTemplate.spec.infrastructureRef"}},
		{kind: "KubevirtMachineTemplate", name: "kubevirt-default-worker", holder: md("spec.template.spec.infrastructureRef"), mdClass: "default-worker"},
		{kind: "KubevirtMachineTemplate", name: "kubevirt-performance-worker", holder: md("spec.template.spec.infrastructureRef"), mdClass: "performance-worker"},
		{kind: "KubeadmConfigTemplate", name: "kubevirt-default-worker", holder: md("spec.template.spec.bootstrap.configRef"), mdClass: "default-worker"},
		{kind: "KubeadmConfigTemplate", name: "kubevirt-performance-worker", holder: md("spec.template.spec.bootstrap.configRef"), mdClass: "performance-worker"},
		{kind: "KubevirtMachinePoolTemplate", name: "kubevirt-default-pool", holder: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool",
			Name: "mp-0", FieldPath: "spec.template.spec.infrastructureRef"}, mpClass: "default-pool"},
		{kind: "KubeadmConfigTemplate", name: "kubevirt-default-pool", holder: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool",
			Name: "mp-0", FieldPath: "spec.template.spec.bootstrap.configRef"}, mpClass: "default-pool"},
	}
	defaults := map[string]string{
		"imageRepository":      `"docker://quay.io/capk/ubuntu-2404-container-disk"`,
		"installKubernetes":    `false`,
		"rootDisk":             `{"size":"20Gi"}`,
		"machine":              `{"cpu":2,"memory":"4Gi"}`,
		"controlPlaneEndpoint": `{"serviceType":"LoadBalancer"}`,
		"isolation":            `{"enabled":true}`,
		"network":              `{}`,
		"bootstrap":            `{"format":"cloud-config","check":"none"}`,
		"dns":                  `{}`,
		"evictionStrategy":     `"External"`,
		"evacuation":           `{"workerAction":"RestartVM","tenantDrainTimeoutSeconds":600,"liveMigrationTimeoutSeconds":600}`,
		"placement":            `{}`,
	}
	placed := maps.Clone(defaults)
	placed["placement"] = `{"podAntiAffinityPreset":"hard","nodeAffinityPreset":{"type":"soft","key":"pool","values":["tenants"]},` +
		`"topologySpread":{"policy":"Hard","topologyKey":"topology.kubernetes.io/zone"}}`
	placed["preset"] = `{"name":"density","memoryOvercommitPercent":200}`
	stockInstall := maps.Clone(defaults)
	stockInstall["image"] = `{"registry":{"url":"docker://quay.io/containerdisks/ubuntu:24.04"}}`
	stockInstall["installKubernetes"] = `true`
	// Maxima: maxCpu set; memory not in whole Gi, so no default maxGuest.
	maxCPU := maps.Clone(defaults)
	maxCPU["machine"] = `{"cpu":3,"memory":"6144Mi","maxCpu":5}`
	maxMemory := maps.Clone(defaults)
	maxMemory["machine"] = `{"cpu":2,"memory":"4Gi","maxMemory":"10Gi"}`
	// Two GPUs of one model and a host device whose count is left out.
	withDevices := maps.Clone(defaults)
	withDevices["devices"] = `{"gpus":[{"deviceName":"nvidia.com/GA102GL_A10","count":2}],"hostDevices":[{"deviceName":"intel.com/qat"}]}`
	everything := map[string]string{
		"image":                `{"registry":{"url":"docker://registry.example.com/node:v1.34.1"}}`,
		"rootDisk":             `{"size":"30Gi","storageClass":"fast"}`,
		"machine":              `{"cpu":4,"memory":"8Gi","instanceType":"standard-4","preference":"sockets-advantage"}`,
		"controlPlaneEndpoint": `{"serviceType":"NodePort","port":30443}`,
		"isolation":            `{"enabled":false,"deniedCIDRs":["10.0.0.0/8"],"networkPolicies":[{"name":"monitoring","spec":{"podSelector":{},"policyTypes":["Ingress"]}}]}`,
		"network":              `{"perCluster":{"templateRef":{"namespace":"net","name":"tenant-vlan"},"binding":"bridge"},"nodeAddressNetwork":"tenant"}`,
		"bootstrap":            `{"format":"ignition","check":"guest-agent"}`,
		"failureDomains":       `[{"name":"zone-a","controlPlane":true,"nodeSelector":{"topology.kubernetes.io/zone":"zone-a"}}]`,
		"dns":                  `{"policy":"None","config":{"nameservers":["192.0.2.53"],"searches":["tenant.example"]}}`,
		"evictionStrategy":     `"External"`,
		"evacuation":           `{"workerAction":"ReplaceMachine","tenantDrainTimeoutSeconds":0,"liveMigrationTimeoutSeconds":120}`,
		"dataDisks":            `[{"name":"data","diskSize":"10Gi"}]`,
		"networkAddresses":     `[{"network":"tenant","addressesFromPools":[{"apiGroup":"ipam.cluster.x-k8s.io","kind":"InClusterIPPool","name":"nodes"}]}]`,
		"tenantCloud":          `{"components":["CloudControllerManager","CSIDriver"],"tokenExpirationSeconds":3600}`,
	}
	external := []any{map[string]any{"name": "cloud-provider", "value": "external"}}
	for _, tt := range []struct {
		name      string
		variables map[string]string
		check     func(g Gomega, role classTemplate, patched *unstructured.Unstructured)
	}{
		{"defaulted variables", defaults, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			switch {
			case u.GetKind() == "KubevirtClusterTemplate":
				g.Expect(field(u, "spec", "template", "spec", "controlPlaneServiceTemplate", "spec", "type")).To(Equal("LoadBalancer"))
				g.Expect(field(u, "spec", "template", "spec", "isolation", "mode")).To(Equal("Enabled"))
				g.Expect(field(u, "spec", "template", "spec", "tenantCloud")).To(BeNil(), "no tenant credential by default")
			case role.mpClass != "" && u.GetKind() == "KubevirtMachinePoolTemplate":
				domain := []string{"spec", "template", "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain"}
				g.Expect(field(u, append(domain, "cpu")...)).To(Equal(map[string]any{"sockets": int64(2)}), "no MachinePool is updated in place")
				g.Expect(field(u, append(domain, "memory")...)).To(Equal(map[string]any{"guest": "4Gi"}))
			case role.name == "kubevirt-default-worker" && u.GetKind() == "KubevirtMachineTemplate":
				g.Expect(field(u, "spec", "template", "spec", "rootDisk", "image", "registry", "url")).To(Equal("docker://quay.io/capk/ubuntu-2404-container-disk:"+classVersion),
					"the repository tagged with the MachineDeployment's version")
				domain := []string{"spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain"}
				g.Expect(field(u, append(domain, "cpu")...)).To(Equal(map[string]any{"sockets": int64(2), "maxSockets": int64(8)}),
					"sockets, with four times as many to grow into in place")
				g.Expect(field(u, append(domain, "memory")...)).To(Equal(map[string]any{"guest": "4Gi", "maxGuest": "16Gi"}))
				g.Expect(field(u, "spec", "template", "spec", "evacuation")).To(Equal(map[string]any{
					"action": "RestartVM", "tenantDrainTimeoutSeconds": int64(600), "liveMigrationTimeoutSeconds": int64(600)}))
			case role.name == "kubevirt-control-plane" && u.GetKind() == "KubevirtMachineTemplate":
				g.Expect(field(u, "spec", "template", "spec", "evacuation", "action")).To(Equal("ReplaceMachine"))
				g.Expect(field(u, "spec", "template", "spec", "rootDisk", "image", "registry", "url")).To(Equal("docker://quay.io/capk/ubuntu-2404-container-disk:"+classVersion),
					"the repository tagged with the control plane's version")
			case u.GetKind() == "KubeadmConfigTemplate", u.GetKind() == "KubeadmControlPlaneTemplate":
				g.Expect(field(u, "spec", "template", "spec", "preKubeadmCommands")).To(BeNil(), "nothing is installed by default")
				g.Expect(field(u, "spec", "template", "spec", "kubeadmConfigSpec", "preKubeadmCommands")).To(BeNil(), "nothing is installed by default")
				g.Expect(field(u, "spec", "template", "spec", "joinConfiguration")).To(BeNil(), "no cloud provider by default")
				g.Expect(field(u, "spec", "template", "spec", "kubeadmConfigSpec", "joinConfiguration")).To(BeNil(), "no cloud provider by default")
			}
		}},
		{"every variable set", everything, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			vm := []string{"spec", "template", "spec", "virtualMachineTemplate", "spec"}
			switch {
			case u.GetKind() == "KubevirtClusterTemplate":
				spec := []string{"spec", "template", "spec"}
				g.Expect(field(u, append(spec, "controlPlaneEndpoint")...)).To(Equal(map[string]any{"port": int64(30443)}), "a port alone is kept")
				g.Expect(field(u, append(spec, "isolation", "mode")...)).To(Equal("Disabled"))
				g.Expect(field(u, append(spec, "customNetworkPolicies")...)).To(HaveLen(1))
				g.Expect(field(u, append(spec, "network", "perCluster", "templateRef", "name")...)).To(Equal("tenant-vlan"))
				g.Expect(field(u, append(spec, "failureDomains")...)).To(HaveLen(1))
				g.Expect(field(u, append(spec, "dnsPolicy")...)).To(Equal("None"))
				g.Expect(field(u, append(spec, "tenantCloud")...)).To(Equal(map[string]any{
					"components": []any{"CloudControllerManager", "CSIDriver"}, "tokenExpirationSeconds": int64(3600)}))
			case u.GetKind() == "KubeadmControlPlaneTemplate":
				g.Expect(field(u, "spec", "template", "spec", "kubeadmConfigSpec", "format")).To(Equal("ignition"))
				for _, phase := range []string{"initConfiguration", "joinConfiguration"} {
					g.Expect(field(u, "spec", "template", "spec", "kubeadmConfigSpec", phase, "nodeRegistration", "kubeletExtraArgs")).To(Equal(external),
						"tenantCloud: the CCM initializes the Nodes")
				}
				g.Expect(field(u, "spec", "template", "spec", "kubeadmConfigSpec", "ignition", "containerLinuxConfig", "additionalConfig")).To(ContainSubstring("containerd.service"))
			case u.GetKind() == "KubeadmConfigTemplate":
				format := "ignition"
				if role.mpClass != "" {
					format = "cloud-config" // the Ignition format does not reach pools yet (docs/flavors.md)
				}
				g.Expect(field(u, "spec", "template", "spec", "format")).To(Equal(format))
				g.Expect(field(u, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs")).To(Equal(external))
			case role.mpClass != "" && u.GetKind() == "KubevirtMachinePoolTemplate":
				pool := []string{"spec", "template", "spec", "template", "spec", "virtualMachineTemplate", "spec"}
				g.Expect(field(u, append(pool, "instancetype", "name")...)).To(Equal("standard-4"))
				g.Expect(field(u, append(pool, "template", "spec", "domain", "cpu")...)).To(BeNil(), "the instance type owns CPU")
			case role.name == "kubevirt-performance-worker" && u.GetKind() == "KubevirtMachineTemplate":
				g.Expect(field(u, append(vm, "template", "spec", "domain", "cpu", "cores")...)).To(BeEquivalentTo(4))
				g.Expect(field(u, append(vm, "template", "spec", "domain", "resources", "limits", "memory")...)).To(Equal("8Gi"))
				g.Expect(field(u, append(vm, "instancetype")...)).To(BeNil(), "the performance class is sized by cpu and memory only")
			default:
				g.Expect(field(u, append(vm, "instancetype", "name")...)).To(Equal("standard-4"))
				g.Expect(field(u, append(vm, "preference", "name")...)).To(Equal("sockets-advantage"))
				g.Expect(field(u, append(vm, "template", "spec", "domain", "cpu")...)).To(BeNil(), "the instance type owns CPU")
				g.Expect(field(u, "spec", "template", "spec", "rootDisk", "storageClassName")).To(Equal("fast"))
				g.Expect(field(u, "spec", "template", "spec", "dataDisks")).To(HaveLen(1))
				g.Expect(field(u, "spec", "template", "spec", "networkAddresses")).To(Equal([]any{map[string]any{"network": "tenant",
					"addressesFromPools": []any{map[string]any{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "nodes"}}}}))
				g.Expect(field(u, "spec", "template", "spec", "virtualMachineBootstrapCheck", "checkStrategy")).To(Equal("guest-agent"))
				g.Expect(field(u, append(vm, "template", "spec", "evictionStrategy")...)).To(Equal("External"))
				g.Expect(field(u, "spec", "template", "spec", "evacuation", "action")).To(Equal("ReplaceMachine"))
				g.Expect(field(u, "spec", "template", "spec", "evacuation", "tenantDrainTimeoutSeconds")).To(BeEquivalentTo(0))
				g.Expect(field(u, "spec", "template", "spec", "evacuation", "liveMigrationTimeoutSeconds")).To(BeEquivalentTo(120))
			}
		}},
		{"a stock image with Kubernetes installed at first boot", stockInstall, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			var commands any
			switch u.GetKind() {
			case "KubeadmConfigTemplate":
				commands = field(u, "spec", "template", "spec", "preKubeadmCommands")
			case "KubeadmControlPlaneTemplate":
				commands = field(u, "spec", "template", "spec", "kubeadmConfigSpec", "preKubeadmCommands")
			case "KubevirtMachineTemplate":
				g.Expect(field(u, "spec", "template", "spec", "rootDisk", "image", "registry", "url")).To(Equal("docker://quay.io/containerdisks/ubuntu:24.04"))
				return
			default:
				return
			}
			g.Expect(commands).To(ContainElements(
				ContainSubstring("apt-get install -y apt-transport-https ca-certificates curl gpg containerd"),
				ContainSubstring("https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /"),
				ContainSubstring("kubelet=1.34.1-1.1 kubeadm=1.34.1-1.1")), "%s installs the machine's version", u.GetKind())
		}},
		{"the maxima a VM grows to in place", maxCPU, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			if role.kind == "KubevirtMachineTemplate" && (role.name == "kubevirt-default-worker" || role.name == "kubevirt-control-plane") {
				domain := []string{"spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain"}
				g.Expect(field(u, append(domain, "cpu")...)).To(Equal(map[string]any{"sockets": int64(3), "maxSockets": int64(5)}))
				g.Expect(field(u, append(domain, "memory")...)).To(Equal(map[string]any{"guest": "6144Mi"}), "no default maximum of memory not in whole Gi")
			}
		}},
		{"a maximum of memory", maxMemory, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			if role.kind == "KubevirtMachineTemplate" && (role.name == "kubevirt-default-worker" || role.name == "kubevirt-control-plane") {
				g.Expect(field(u, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "memory")).To(
					Equal(map[string]any{"guest": "4Gi", "maxGuest": "10Gi"}))
			}
		}},
		{"devices", withDevices, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			var vmi []string
			switch {
			case u.GetKind() == "KubevirtMachinePoolTemplate":
				vmi = []string{"spec", "template", "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec"}
			case u.GetKind() == "KubevirtMachineTemplate":
				vmi = []string{"spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec"}
			default:
				return
			}
			if role.name == "kubevirt-control-plane" {
				g.Expect(field(u, append(vmi, "domain", "devices")...)).To(Equal(map[string]any{}), "the control plane gets no device")
				return
			}
			g.Expect(field(u, append(vmi, "domain", "devices")...)).To(Equal(map[string]any{
				"gpus": []any{
					map[string]any{"name": "gpu-0-0", "deviceName": "nvidia.com/GA102GL_A10"},
					map[string]any{"name": "gpu-0-1", "deviceName": "nvidia.com/GA102GL_A10"},
				},
				"hostDevices": []any{map[string]any{"name": "hostdevice-0-0", "deviceName": "intel.com/qat"}},
			}), "%s %s", u.GetKind(), role.name)
			g.Expect(field(u, append(vmi, "tolerations")...)).To(Equal([]any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists"}}))
		}},
		{"placement and preset", placed, func(g Gomega, role classTemplate, u *unstructured.Unstructured) {
			if u.GetKind() != "KubevirtMachineTemplate" {
				return
			}
			spec := []string{"spec", "template", "spec"}
			g.Expect(field(u, append(spec, "placement", "podAntiAffinityPreset")...)).To(Equal("hard"))
			g.Expect(field(u, append(spec, "placement", "nodeAffinityPreset", "values")...)).To(Equal([]any{"tenants"}))
			g.Expect(field(u, append(spec, "placement", "topologySpread", "policy")...)).To(Equal("Hard"))
			if role.kind == "KubevirtMachineTemplate" && role.name == "kubevirt-performance-worker" {
				g.Expect(field(u, append(spec, "preset")...)).To(BeNil(), "the performance class is shaped by its own template")
			} else {
				g.Expect(field(u, append(spec, "preset", "memoryOvercommitPercent")...)).To(BeEquivalentTo(200))
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clusterclass-"}}
			g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
			var vars []runtimehooksv1.Variable
			for name, value := range tt.variables {
				vars = append(vars, runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(value)}})
			}
			for _, role := range roles {
				u := templates[role.kind+"/"+role.name].DeepCopy()
				u.SetNamespace(ns.Name)
				for i := range class.Spec.Patches {
					u = applyPatch(g, &class.Spec.Patches[i], role, vars, u)
				}
				g.Expect(env.Client.Create(context.Background(), u, client.DryRunAll)).To(Succeed(), "%s for %s %s", u.GetName(), role.holder.Kind, role.holder.FieldPath)
				tt.check(g, role, u)
			}
		})
	}
}

// classVersion is the Kubernetes version of the control plane and the
// MachineDeployments the patches are applied for.
const classVersion = "v1.34.1"

// applyPatch runs one ClusterClass patch through Cluster API's inline
// generator for a template in its role and applies the JSON patches it
// returns.
func applyPatch(g Gomega, patch *clusterv1.ClusterClassPatch, role classTemplate, vars []runtimehooksv1.Variable, u *unstructured.Unstructured) *unstructured.Unstructured {
	item := runtimehooksv1.GeneratePatchesRequestItem{UID: types.UID("t"), HolderReference: role.holder, Object: runtime.RawExtension{Object: u}}
	builtin := `{"controlPlane":{"version":"` + classVersion + `"}}`
	switch {
	case role.mdClass != "":
		builtin = `{"controlPlane":{"version":"` + classVersion + `"},"machineDeployment":{"class":"` + role.mdClass + `","version":"` + classVersion + `"}}`
	case role.mpClass != "":
		builtin = `{"controlPlane":{"version":"` + classVersion + `"},"machinePool":{"class":"` + role.mpClass + `","version":"` + classVersion + `"}}`
	}
	item.Variables = []runtimehooksv1.Variable{{Name: "builtin", Value: apiextensionsv1.JSON{Raw: []byte(builtin)}}}
	resp, err := inline.NewGenerator(patch).Generate(context.Background(), nil,
		&runtimehooksv1.GeneratePatchesRequest{Variables: vars, Items: []runtimehooksv1.GeneratePatchesRequestItem{item}})
	g.Expect(err).NotTo(HaveOccurred(), "patch %s", patch.Name)
	for _, p := range resp.Items {
		decoded, err := jsonpatch.DecodePatch(p.Patch)
		g.Expect(err).NotTo(HaveOccurred())
		raw, err := u.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		patched, err := decoded.Apply(raw)
		g.Expect(err).NotTo(HaveOccurred(), "patch %s on %s: %s", patch.Name, u.GetName(), p.Patch)
		u = &unstructured.Unstructured{}
		g.Expect(u.UnmarshalJSON(patched)).To(Succeed())
	}
	return u
}

// readClusterClass reads templates/clusterclass-kubevirt.yaml: the class,
// and its templates by kind and name ("KubeadmConfigTemplate/kubevirt-default-worker").
func readClusterClass(t *testing.T) (*clusterv1.ClusterClass, map[string]*unstructured.Unstructured) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "templates", "clusterclass-kubevirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	class := &clusterv1.ClusterClass{}
	templates := map[string]*unstructured.Unstructured{}
	for _, u := range decodeObjects(t, raw) {
		if u.GetKind() != "ClusterClass" {
			templates[u.GetKind()+"/"+u.GetName()] = u
			continue
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, class); err != nil {
			t.Fatal(err)
		}
	}
	return class, templates
}

// field reads a nested field of an object, nil when it is absent.
func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

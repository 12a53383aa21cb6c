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

package inplace

import (
	"encoding/json"
	"errors"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func raw(g Gomega, obj any) runtime.RawExtension {
	data, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return runtime.RawExtension{Raw: data}
}

func template(s *infrav1.KubevirtMachineSpec) *infrav1.KubevirtMachineTemplate {
	t := &infrav1.KubevirtMachineTemplate{Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: *s}}}
	t.SetGroupVersionKind(infrav1.GroupVersion.WithKind("KubevirtMachineTemplate"))
	t.Name = "md-0-abc"
	return t
}

// applied is the current template after the hook's patch, as Cluster API
// applies it before comparing with the desired one.
func applied(g Gomega, current runtime.RawExtension, patch runtimehooksv1.Patch) *infrav1.KubevirtMachineTemplate {
	out := &infrav1.KubevirtMachineTemplate{}
	g.Expect(json.Unmarshal(appliedRaw(g, current, patch), out)).To(Succeed())
	return out
}

func appliedRaw(g Gomega, current runtime.RawExtension, patch runtimehooksv1.Patch) []byte {
	g.Expect(patch.PatchType).To(Equal(runtimehooksv1.JSONMergePatchType))
	data, err := jsonpatch.MergePatch(current.Raw, patch.Patch)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// templateSpec is spec.template.spec of a raw template, untyped, as
// Cluster API compares it.
func templateSpec(g Gomega, data []byte) any {
	var u map[string]any
	g.Expect(json.Unmarshal(data, &u)).To(Succeed())
	return u["spec"].(map[string]any)["template"].(map[string]any)["spec"]
}

// migratable says every machine can take a hot-plug and grow its disks.
var migratable = Checks{
	NoHotplug: func() (string, error) { return "", nil },
	NoGrowth:  func(map[string]resource.Quantity) (string, error) { return "", nil },
}

// asked fails a check that should not run.
func asked() (string, error) { return "", errors.New("asked") }

func TestCanUpdateMachineSet(t *testing.T) {
	bigger := func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) {
		d.CPU.Sockets = 4
		d.Memory.Guest = ptr.To(resource.MustParse("8Gi"))
	}
	t.Run("more CPU and memory: covered whole", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate = raw(g, template(spec(nil)))
		desired := template(spec(bigger))
		req.Desired.InfrastructureMachineTemplate = raw(g, desired)
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, migratable)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.Message).To(Equal("in place: CPU sockets 2 to 4; guest memory 4Gi to 8Gi"))
		after := appliedRaw(g, req.Current.InfrastructureMachineTemplate, resp.InfrastructureMachineTemplatePatch)
		g.Expect(templateSpec(g, after)).To(Equal(templateSpec(g, req.Desired.InfrastructureMachineTemplate.Raw)),
			"the patched template's spec is the desired one, compared untyped as Cluster API does")
	})
	t.Run("a new image as well: the rest is left for a rollout", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate = raw(g, template(spec(nil)))
		desired := template(spec(func(d *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
			bigger(d, s)
			s.RootDisk.Image = infrav1.ImageSource{Registry: &infrav1.RegistryImageSource{URL: "docker://example.com/node:v2"}}
		}))
		req.Desired.InfrastructureMachineTemplate = raw(g, desired)
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, migratable)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.Message).To(ContainSubstring("needs new machines: spec.rootDisk.image.registry changed"))
		after := applied(g, req.Current.InfrastructureMachineTemplate, resp.InfrastructureMachineTemplatePatch)
		g.Expect(equality.Semantic.DeepEqual(after.Spec, desired.Spec)).To(BeFalse(), "Cluster API sees the image left over and rolls")
		g.Expect(after.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.Sockets).To(BeEquivalentTo(4))
	})
	t.Run("a template written from YAML and a copy written through Go: still covered whole", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		// As the API server keeps it from a YAML that said `devices: {}`
		// and `evacuation: {}`; a typed copy drops both.
		current := map[string]any{}
		g.Expect(json.Unmarshal(raw(g, template(spec(nil))).Raw, &current)).To(Succeed())
		tspec := current["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		tspec["evacuation"] = map[string]any{}
		domain := tspec["virtualMachineTemplate"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)
		domain["devices"] = map[string]any{}
		req.Current.InfrastructureMachineTemplate = raw(g, current)
		req.Desired.InfrastructureMachineTemplate = raw(g, template(spec(bigger)))
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, migratable)
		g.Expect(resp.Message).To(Equal("in place: CPU sockets 2 to 4; guest memory 4Gi to 8Gi"))
		after := appliedRaw(g, req.Current.InfrastructureMachineTemplate, resp.InfrastructureMachineTemplatePatch)
		g.Expect(templateSpec(g, after)).To(Equal(templateSpec(g, req.Desired.InfrastructureMachineTemplate.Raw)),
			"Cluster API compares untyped: the patch leaves nothing for it to see")
	})
	t.Run("machines that cannot migrate: CPU and memory need new machines", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate = raw(g, template(spec(nil)))
		req.Desired.InfrastructureMachineTemplate = raw(g, template(spec(bigger)))
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, Checks{NoHotplug: func() (string, error) { return "the VM of machine md-0-x cannot migrate: bridged", nil }})
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.Message).To(Equal("needs new machines: CPU sockets 2 to 4: the VM of machine md-0-x cannot migrate: bridged; " +
			"guest memory 4Gi to 8Gi: the VM of machine md-0-x cannot migrate: bridged"))
	})
	t.Run("labels only: the machines' migratability is not asked", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate = raw(g, template(spec(nil)))
		req.Desired.InfrastructureMachineTemplate = raw(g, template(spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "gold"}
		})))
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, Checks{NoHotplug: asked, NoGrowth: func(map[string]resource.Quantity) (string, error) { return asked() }})
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.Message).To(Equal("in place: the VirtualMachine's labels and annotations"))
	})
	t.Run("a larger root disk: covered where the claims can grow, else left for a rollout", func(t *testing.T) {
		g := NewWithT(t)
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate = raw(g, template(spec(nil)))
		req.Desired.InfrastructureMachineTemplate = raw(g, template(spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
			s.RootDisk.DiskSize = resource.MustParse("40Gi")
		})))
		var grown map[string]resource.Quantity
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, Checks{NoHotplug: asked, NoGrowth: func(disks map[string]resource.Quantity) (string, error) { grown = disks; return "", nil }})
		g.Expect(resp.Message).To(Equal("in place: root disk 20Gi to 40Gi"))
		g.Expect(grown).To(Equal(map[string]resource.Quantity{"rootdisk": resource.MustParse("40Gi")}),
			"the check is asked about the disks that grow, to their new size, and the hot-plug check not at all")

		resp = &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, Checks{NoHotplug: asked, NoGrowth: func(map[string]resource.Quantity) (string, error) {
			return "for the VM of machine md-0-x, disk rootdisk: storage class fixed of claim md-0-x-rootdisk does not allow volume expansion", nil
		}})
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.Message).To(Equal("needs new machines: root disk 20Gi to 40Gi: for the VM of machine md-0-x, disk rootdisk: " +
			"storage class fixed of claim md-0-x-rootdisk does not allow volume expansion"))
		after := applied(g, req.Current.InfrastructureMachineTemplate, resp.InfrastructureMachineTemplatePatch)
		g.Expect(after.Spec.Template.Spec.RootDisk.DiskSize.String()).To(Equal("20Gi"), "Cluster API sees the disk left over and rolls")
	})
	t.Run("another provider's template", func(t *testing.T) {
		g := NewWithT(t)
		other := map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachineTemplate"}
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate = raw(g, other), raw(g, other)
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		answerMachineSet(req, resp, migratable)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(resp.InfrastructureMachineTemplatePatch.IsDefined()).To(BeFalse())
	})
}

func TestCanUpdateMachine(t *testing.T) {
	g := NewWithT(t)
	machine := func(s *infrav1.KubevirtMachineSpec, providerID *string) *infrav1.KubevirtMachine {
		m := &infrav1.KubevirtMachine{Spec: *s}
		m.SetGroupVersionKind(infrav1.GroupVersion.WithKind("KubevirtMachine"))
		m.Spec.ProviderID = providerID
		return m
	}
	req := &runtimehooksv1.CanUpdateMachineRequest{}
	req.Current.InfrastructureMachine = raw(g, machine(spec(nil), ptr.To("kubevirt://cp-0")))
	// KubeadmControlPlane's desired machine keeps the provider ID (its
	// server-side apply dry run), and Cluster API compares the whole spec.
	req.Desired.InfrastructureMachine = raw(g, machine(spec(func(d *kubevirtv1.DomainSpec, _ *infrav1.KubevirtMachineSpec) { d.CPU.Sockets = 3 }),
		ptr.To("kubevirt://cp-0")))
	resp := &runtimehooksv1.CanUpdateMachineResponse{}
	answerMachine(req, resp, migratable)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.Message).To(Equal("in place: CPU sockets 2 to 3"))
	g.Expect(string(resp.InfrastructureMachinePatch.Patch)).To(MatchJSON(
		`{"spec":{"virtualMachineTemplate":{"spec":{"template":{"spec":{"domain":{"cpu":{"sockets":3}}}}}}}}`))
}

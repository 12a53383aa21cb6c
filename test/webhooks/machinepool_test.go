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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func machinePool(mutate func(p *infrav1.KubevirtMachinePool)) *infrav1.KubevirtMachinePool {
	p := &infrav1.KubevirtMachinePool{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pool-", Namespace: testNamespace},
		Spec: infrav1.KubevirtMachinePoolSpec{Template: infrav1.KubevirtMachineTemplateResource{
			Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: validVMSpec()}}}},
	}
	mutate(p)
	return p
}

func machinePoolTemplate(mutate func(t *infrav1.KubevirtMachinePoolTemplate)) *infrav1.KubevirtMachinePoolTemplate {
	t := &infrav1.KubevirtMachinePoolTemplate{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pool-template-", Namespace: testNamespace},
		Spec: infrav1.KubevirtMachinePoolTemplateSpec{Template: infrav1.KubevirtMachinePoolTemplateResource{
			Spec: machinePool(func(*infrav1.KubevirtMachinePool) {}).Spec}},
	}
	mutate(t)
	return t
}

// TestAdmissionMachinePools checks what the webhooks of KubevirtMachinePool
// and its template refuse, with the field path, what they default, and
// which changes they allow.
func TestAdmissionMachinePools(t *testing.T) {
	ctx := context.Background()
	rejected := []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"pool with a providerID in its template", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.ProviderID = ptr.To("kubevirt://one")
		}), "spec.template.spec.providerID"},
		{"pool with one hostname for every instance", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Hostname = "node"
		}), "spec.template.spec.virtualMachineTemplate.spec.template.spec.hostname"},
		{"pool whose VMs grow memory without architecture amd64, which virt-api refuses of a VirtualMachinePool", machinePool(func(p *infrav1.KubevirtMachinePool) {
			m := p.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory
			m.Guest, m.MaxGuest = ptr.To(resource.MustParse("4Gi")), ptr.To(resource.MustParse("16Gi"))
		}), "spec.template.spec.virtualMachineTemplate.spec.template.spec.domain.memory.maxGuest"},
		{"pool with the ssh bootstrap check", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategySSH
		}), "spec.template.spec.virtualMachineBootstrapCheck.checkStrategy"},
		{"pool with an invalid VM template", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.Disks[0].Name = "other"
		}), "spec.template.spec.virtualMachineTemplate.spec.template.spec.domain.devices.disks[0].name"},
		{"pool with pool addresses", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant",
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.template.spec.networkAddresses"},
		{"pool with an invalid label for its machines", machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Labels: map[string]string{"-bad": "x"}}
		}), "spec.template.metadata.labels"},
		{"pool template with a providerIDList", machinePoolTemplate(func(t *infrav1.KubevirtMachinePoolTemplate) {
			t.Spec.Template.Spec.ProviderIDList = []string{"kubevirt://one"}
		}), "spec.template.spec.providerIDList"},
		{"pool template with an invalid VM template", machinePoolTemplate(func(t *infrav1.KubevirtMachinePoolTemplate) {
			t.Spec.Template.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template = nil
		}), "spec.template.spec.template.spec.virtualMachineTemplate.spec.template"},
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			expectInvalid(t, env.Client.Create(ctx, tc.obj), tc.field)
		})
	}

	update := func(obj client.Object, mutate func(), opts ...client.UpdateOption) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			mutate()
			return env.Client.Update(ctx, obj, opts...)
		})
	}
	t.Run("pool defaults, may change its machines, not its infra cluster or namespace", func(t *testing.T) {
		p := machinePool(func(p *infrav1.KubevirtMachinePool) {
			p.Spec.Template.Spec.VirtualMachineTemplate.Spec.RunStrategy = nil
			p.Spec.Template.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Name: "infra"}
		})
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if rs := p.Spec.Template.Spec.VirtualMachineTemplate.Spec.RunStrategy; rs == nil || *rs != kubevirtv1.RunStrategyAlways {
			t.Errorf("runStrategy = %v, want Always", rs)
		}
		if err := update(p, func() { p.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyNone }); err != nil {
			t.Errorf("changing the pool's machines was refused: %v", err)
		}
		if err := update(p, func() { p.Spec.ProviderIDList = []string{"kubevirt://" + p.Name + "-0"} }); err != nil {
			t.Errorf("setting providerIDList was refused: %v", err)
		}
		expectInvalid(t, update(p, func() { p.Spec.Template.Spec.InfraClusterSecretRef.Name = "elsewhere" }),
			"spec.template.spec.infraClusterSecretRef")
		expectInvalid(t, update(p, func() { p.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Namespace = "elsewhere" }),
			"spec.template.spec.virtualMachineTemplate.metadata.namespace")
	})
	t.Run("pool template is immutable but for the topology controller's dry run", func(t *testing.T) {
		tmpl := machinePoolTemplate(func(*infrav1.KubevirtMachinePoolTemplate) {})
		if err := env.Client.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
		change := func() {
			tmpl.Spec.Template.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyNone
		}
		expectInvalid(t, update(tmpl, change), "spec.template.spec")
		err := update(tmpl, func() {
			tmpl.Annotations = map[string]string{"topology.cluster.x-k8s.io/dry-run": ""}
			change()
		}, client.DryRunAll)
		if err != nil {
			t.Errorf("dry run refused: %v", err)
		}
	})
}

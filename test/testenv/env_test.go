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

package testenv

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkServesEveryKind checks that each installed kind of env can be
// written and read back, and that the status subresource of the KubeVirt
// and CDI kinds is separate from their spec, as on a real infra cluster.
// TestRealCDIControlPlane runs it on its environment before CDI starts:
// an API server start is the dear part of either.
func checkServesEveryKind(t *testing.T, env *Env) {
	ctx := context.Background()

	lists := []client.ObjectList{
		&clusterv1.ClusterList{}, &clusterv1.MachineDeploymentList{}, &kubevirtv1.VirtualMachineList{},
		&kubevirtv1.VirtualMachineInstanceList{}, &cdiv1.DataVolumeList{}, &cdiv1.StorageProfileList{},
		&cdiv1.DataSourceList{}, &cdiv1.DataImportCronList{},
	}
	for _, l := range lists {
		if err := env.Client.List(ctx, l); err != nil {
			t.Errorf("listing %T: %v", l, err)
		}
	}

	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "default"},
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}},
	}
	if err := env.Client.Create(ctx, vm); err != nil {
		t.Fatalf("creating a VirtualMachine: %v", err)
	}
	vm.Status.Ready = true
	vm.Spec.RunStrategy = nil // ignored by a status update
	if err := env.Client.Status().Update(ctx, vm); err != nil {
		t.Fatalf("updating VirtualMachine status: %v", err)
	}
	got := &kubevirtv1.VirtualMachine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), got); err != nil {
		t.Fatal(err)
	}
	if !got.Status.Ready || got.Spec.RunStrategy == nil || *got.Spec.RunStrategy != always {
		t.Errorf("status subresource not separate from spec: ready=%v runStrategy=%v", got.Status.Ready, got.Spec.RunStrategy)
	}

	for _, name := range []string{"kubevirtmachines.infrastructure.cluster.x-k8s.io", "kubevirtclusters.infrastructure.cluster.x-k8s.io"} {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
			t.Fatal(err)
		}
		for k, v := range ContractLabels {
			if m.Labels[k] != v {
				t.Errorf("CRD %s: label %s = %q, want %q", name, k, m.Labels[k], v)
			}
		}
	}
}

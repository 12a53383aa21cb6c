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

// Package poolbuilder builds the KubeVirt VirtualMachinePool behind a
// KubevirtMachinePool, from the same VM builder single machines use.
package poolbuilder

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// Input is everything the pool depends on.
type Input struct {
	// VM builds the pool's VM template: its Name is the pool's name on the
	// infra cluster, its KubevirtMachineNamespace the KubevirtMachinePool's
	// namespace, its MachinePool the MachinePool's name; it has no
	// MachineName, since the pool's VMs share the template.
	VM vmbuilder.Input
	// Replicas is how many VMs the pool keeps.
	Replicas int32
}

// perVMLabels name one machine; a template shared by a pool's VMs cannot
// carry them.
var perVMLabels = []string{infrav1.MachineLabel, infrav1.KubevirtMachineLabel, infrav1.VMNameLabel}

// Build returns the VirtualMachinePool for in. Its VM template is what the
// VM builder makes for a single machine, except what differs per VM:
// KubeVirt names each VM <pool>-<index>, appends the index to the
// DataVolume template names, and leaves the hostname empty so that each
// guest is named after its VM; the per-machine labels are dropped and the
// owner annotation names the KubevirtMachinePool. KubeVirt's pool neither
// removes nor updates VMs by itself (unmanaged scale-in and update): the
// provider picks which VMs go, through their Machines, so that Cluster API
// drains their Nodes first.
func Build(in Input) (*poolv1.VirtualMachinePool, error) {
	vm, err := vmbuilder.Build(in.VM)
	if err != nil {
		return nil, err
	}
	selector := Selector(in.VM.Name)
	owner := map[string]string{infrav1.PoolOwnerAnnotation: vmbuilder.OwnerOf(in.VM.KubevirtMachineNamespace, in.VM.Name)}
	relabel := func(m *metav1.ObjectMeta) {
		for _, k := range perVMLabels {
			delete(m.Labels, k)
		}
		m.Labels = MergedInto(m.Labels, selector)
		delete(m.Annotations, infrav1.OwnerAnnotation)
		m.Annotations = MergedInto(m.Annotations, owner)
	}
	relabel(&vm.ObjectMeta)
	relabel(&vm.Spec.Template.ObjectMeta)
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		delete(t.Annotations, infrav1.OwnerAnnotation)
		t.Annotations = MergedInto(t.Annotations, owner)
	}
	vm.Spec.Template.Spec.Hostname = ""

	hash, err := templateHash(vm)
	if err != nil {
		return nil, err
	}
	vm.Annotations[infrav1.PoolTemplateHashAnnotation] = hash

	poolLabels := maps.Clone(vm.Labels)
	return &poolv1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.VM.Name, Namespace: in.VM.Namespace,
			Labels: poolLabels, Annotations: maps.Clone(owner), OwnerReferences: vm.OwnerReferences,
		},
		Spec: poolv1.VirtualMachinePoolSpec{
			Replicas: &in.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			VirtualMachineTemplate: &poolv1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: vm.Labels, Annotations: vm.Annotations},
				Spec:       vm.Spec,
			},
			ScaleInStrategy: &poolv1.VirtualMachinePoolScaleInStrategy{Unmanaged: &poolv1.VirtualMachinePoolUnmanagedStrategy{}},
			UpdateStrategy:  &poolv1.VirtualMachinePoolUpdateStrategy{Unmanaged: &poolv1.VirtualMachinePoolUnmanagedStrategy{}},
		},
	}, nil
}

// templateHash hashes what makes one of the pool's VMs: its labels,
// annotations and spec. KubeVirt's own revision names change with any pool
// change, replicas included, so they cannot say whether a VM is outdated.
func templateHash(vm *kubevirtv1.VirtualMachine) (string, error) {
	return Hash(vm.Labels, vm.Annotations, vm.Spec)
}

// Hash is a short hash of an object's labels, annotations and spec, to
// tell whether what the provider would write has changed.
func Hash(labels, annotations map[string]string, spec any) (string, error) {
	b, err := json.Marshal(struct {
		Labels, Annotations map[string]string
		Spec                any
	}{labels, annotations, spec})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// Outdated reports whether a VM of the pool was made from an older template
// than the pool's current one.
func Outdated(pool *poolv1.VirtualMachinePool, vm *kubevirtv1.VirtualMachine) bool {
	want := pool.Spec.VirtualMachineTemplate.ObjectMeta.Annotations[infrav1.PoolTemplateHashAnnotation]
	return want != "" && vm.Annotations[infrav1.PoolTemplateHashAnnotation] != want
}

// Selector is the label selecting the VMs of the pool named name; a name
// too long for a label value is hashed.
func Selector(name string) map[string]string {
	return map[string]string{infrav1.KubevirtMachinePoolLabel: format.MustFormatValue(name)}
}

// MergedInto copies extra into base, made if nil, and returns it.
func MergedInto(base, extra map[string]string) map[string]string {
	if base == nil {
		base = map[string]string{}
	}
	maps.Copy(base, extra)
	return base
}

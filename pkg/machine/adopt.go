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

package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// communityMachine names what a VM the community provider made for this
// machine carries.
func communityMachine(sc *Scope) adoption.Machine {
	return adoption.Machine{Namespace: sc.KubevirtMachine.Namespace, Name: sc.KubevirtMachine.Name, Cluster: sc.Cluster.Name}
}

// adopt takes over the VM the community provider made for this machine
// (adoption.CommunityVM), in place: the VM, its instance and disks stay as
// they are, and only metadata is written. The VM is first checked against
// the multi-tenancy policy as one this provider would build: a VM the
// provider will act on with its own rights must be one it would have been
// allowed to make. Its user data Secret goes with it from then on. The
// reconcile ends; the VM's update brings the machine back.
func (s *Service) adopt(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	spec := km.Spec.DeepCopy()
	spec.VirtualMachineTemplate = infrav1.VirtualMachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: vm.Labels, Annotations: vm.Annotations}, Spec: *vm.Spec.DeepCopy()}
	// The community provider's root disk is the VM's own DataVolume
	// template, not a clone of a golden image.
	spec.RootDisk, spec.DataDisks = nil, nil
	if o, err := s.vmAllowed(ctx, sc, spec, vm.Namespace, field.NewPath("virtualMachine")); err != nil || o.Reason != "" {
		if o.Reason != "" {
			o.Message = fmt.Sprintf("VirtualMachine %s/%s, made by the community provider, is not adopted: %s", vm.Namespace, vm.Name, o.Message)
		}
		return o, err
	}

	before := vm.DeepCopy()
	marks := adoption.Marks{Owner: vmbuilder.OwnerOf(km.Namespace, km.Name), Labels: adoptedLabels(sc, vm.Name)}
	if !sc.Access.Infra.External && vm.Namespace == km.Namespace {
		marks.Controller = metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine"))
	}
	adoption.MarkVM(vm, marks)
	// Optimistic: a VM changed since it was read is read again.
	if err := sc.Access.Infra.Client.Patch(ctx, vm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome.Outcome{}, fmt.Errorf("adopting VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	secrets, err := s.adoptCommunityUserData(ctx, sc, vm)
	if err != nil {
		return outcome.Outcome{}, err
	}
	message := fmt.Sprintf("adopted VirtualMachine %s/%s, which the community KubeVirt provider made for this machine, with its running instance and disks", vm.Namespace, vm.Name)
	if len(secrets) > 0 {
		message += fmt.Sprintf(", and its user data Secret %v", secrets)
	}
	s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, infrav1.AdoptedReason, "Adopt", "%s", message)
	return outcome.Wait(infrav1.AdoptedReason, message), nil
}

// adoptedLabels are the identity labels the provider's own VM of this
// machine would carry.
func adoptedLabels(sc *Scope, vmName string) map[string]string {
	return vmbuilder.IdentityLabels(vmbuilder.Input{
		Name: vmName, KubevirtMachineNamespace: sc.KubevirtMachine.Namespace,
		ClusterName: sc.Cluster.Name, MachineName: sc.Machine.Name,
		MachineDeployment: sc.Machine.Labels[clusterv1.MachineDeploymentNameLabel],
		ControlPlane:      util.IsControlPlaneMachine(sc.Machine),
	})
}

// adoptCommunityUserData makes the adopted VM own the community provider's
// user data Secret it boots from, so that it goes with the VM, and returns
// the names of the Secrets adopted.
func (s *Service) adoptCommunityUserData(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) ([]string, error) {
	var adopted []string
	for _, name := range adoption.UserDataSecrets(vm) {
		secret := &corev1.Secret{}
		found, err := get(ctx, sc.Access.Infra.APIReader, types.NamespacedName{Namespace: vm.Namespace, Name: name}, secret)
		if err != nil {
			return nil, err
		}
		if !found || !adoption.CommunityUserData(secret, secret.Type, sc.Cluster.Name) {
			continue
		}
		before := secret.DeepCopy()
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[infrav1.OwnerAnnotation] = vmbuilder.OwnerOf(sc.KubevirtMachine.Namespace, sc.KubevirtMachine.Name)
		secret.OwnerReferences = append(secret.OwnerReferences, vmOwnerReference(vm))
		if err := sc.Access.Infra.Client.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, fmt.Errorf("adopting user data Secret %s/%s: %w", secret.Namespace, name, err)
		}
		adopted = append(adopted, name)
	}
	return adopted, nil
}

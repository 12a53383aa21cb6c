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
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
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
// allowed to make. The running instance, the disks and the user data
// Secret are marked before the VM, whose mark ends the adoption: a write
// that fails is tried again by the next reconcile, and a machine deleted
// meanwhile leaves the VM and what it owns alone (delete.go). The reconcile ends; the
// VM's update brings the machine back.
func (s *Service) adopt(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	if refused := adoptionRefused(sc, vm); refused != "" {
		return outcome.Fail(infrav1.NameConflictReason, notAdopted(vm, refused)), nil
	}
	if !sc.FinalizerStored {
		// Nothing is taken over before the machine's finalizer is stored,
		// as nothing is created: the write of the finalizer brings it back.
		return outcome.Wait(infrav1.PendingReason, "the community provider's VirtualMachine is adopted once the machine's finalizer is stored"), nil
	}
	spec := km.Spec.DeepCopy()
	spec.VirtualMachineTemplate = infrav1.VirtualMachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: vm.Labels, Annotations: vm.Annotations}, Spec: *vm.Spec.DeepCopy()}
	if o, err := s.vmAllowed(ctx, sc, spec, vm.Namespace, field.NewPath("virtualMachine")); err != nil || o.Reason != "" {
		if o.Reason != "" {
			o.Message = notAdopted(vm, o.Message)
		}
		return o, err
	}

	owner := vmbuilder.OwnerOf(km.Namespace, km.Name)
	if refused, err := s.markInstanceAndDisks(ctx, sc, vm, owner); err != nil {
		return outcome.Outcome{}, err
	} else if refused != "" {
		return outcome.Fail(infrav1.NameConflictReason, notAdopted(vm, refused)), nil
	}
	secrets, err := s.adoptCommunityUserData(ctx, sc, vm, owner)
	if err != nil {
		return outcome.Outcome{}, err
	}
	before := vm.DeepCopy()
	marks := adoption.Marks{Owner: owner, Labels: adoptedLabels(sc, vm.Name)}
	if !sc.Access.Infra.External && vm.Namespace == km.Namespace {
		marks.Controller = metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine"))
	}
	adoption.MarkVM(vm, marks)
	// Optimistic: a VM changed since it was read is read again.
	if err := sc.Access.Infra.Client.Patch(ctx, vm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome.Outcome{}, fmt.Errorf("adopting VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	message := fmt.Sprintf("adopted VirtualMachine %s/%s, which the community KubeVirt provider made for this machine, with its running instance and disks", vm.Namespace, vm.Name)
	if len(secrets) > 0 {
		message += fmt.Sprintf(", and its user data Secret %v", secrets)
	}
	s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, infrav1.AdoptedReason, "Adopt", "%s", message)
	return outcome.Wait(infrav1.AdoptedReason, message), nil
}

// notAdopted says that the community provider's VM is not adopted, and why.
func notAdopted(vm *kubevirtv1.VirtualMachine, why string) string {
	return fmt.Sprintf("VirtualMachine %s/%s was made by the community provider for this machine but is not adopted: %s", vm.Namespace, vm.Name, why)
}

// adoptionRefused says why a VM with the community provider's marks for
// this machine is still not adopted, or "" when nothing stands against it.
func adoptionRefused(sc *Scope, vm *kubevirtv1.VirtualMachine) string {
	km := sc.KubevirtMachine
	want := infrav1.ProviderIDPrefix + vm.Name
	switch {
	case tenancy.Shared(vm.Namespace, km.Namespace, sc.Access.Infra.External, sc.Access.Infra.Secret.Namespace):
		// Labels are all that tells the community provider's VM apart, and
		// in a namespace several tenants' clusters share, the objects it
		// names cannot be told to be this cluster's.
		return "its namespace is shared by tenants' clusters (an identity's or an external infra cluster's), where labels alone do not prove whose it is"
	case km.Spec.RootDisk != nil || len(km.Spec.DataDisks) > 0:
		return "this machine asks for rootDisk or dataDisks, which the community provider never made; its VM's disks are its own dataVolumeTemplates"
	case sc.Machine.Spec.ProviderID != "" && sc.Machine.Spec.ProviderID != want:
		return fmt.Sprintf("the Machine's providerID is %s, not %s", sc.Machine.Spec.ProviderID, want)
	case km.Spec.ProviderID != nil && *km.Spec.ProviderID != want:
		return fmt.Sprintf("the KubevirtMachine's providerID is %s, not %s", *km.Spec.ProviderID, want)
	}
	return ""
}

// markInstanceAndDisks gives the adopted VM's running instance and its
// DataVolumes the owner annotation, as the provider's own VMs' have it
// from their templates: their events then reach the machine, and its
// deletion waits for the instance. All are read and checked before any is
// written: only what the VM itself controls and no one has marked, since
// a name in a template can be another machine's disk or a golden image.
// It returns why the VM is not adopted when one is not the VM's own.
func (s *Service) markInstanceAndDisks(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, owner string) (string, error) {
	names := []string{vm.Name}
	objs := []client.Object{&kubevirtv1.VirtualMachineInstance{}}
	for _, t := range vm.Spec.DataVolumeTemplates {
		names, objs = append(names, t.Name), append(objs, &cdiv1.DataVolume{})
	}
	var unmarked []client.Object
	for i, obj := range objs {
		found, err := get(ctx, sc.Access.Infra.APIReader, types.NamespacedName{Namespace: vm.Namespace, Name: names[i]}, obj)
		switch {
		case err != nil:
			return "", err
		case !found || ownedobject.IsOwnedBy(obj, owner):
		case !metav1.IsControlledBy(obj, vm) || obj.GetAnnotations()[infrav1.OwnerAnnotation] != "":
			return fmt.Sprintf("%T %s/%s is not the VM's own", obj, vm.Namespace, names[i]), nil
		default:
			unmarked = append(unmarked, obj)
		}
	}
	for _, obj := range unmarked {
		before := obj.DeepCopyObject().(client.Object)
		ownedobject.Mark(obj, owner)
		if err := sc.Access.Infra.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return "", fmt.Errorf("marking %T %s/%s of the adopted VM: %w", obj, vm.Namespace, obj.GetName(), err)
		}
	}
	return "", nil
}

// labelInstance gives the running instance of an adopted VM, started by
// the community provider, and its virt-launcher pods the identity labels,
// and the instance the adopted-from annotation; it runs once the VM is
// adopted, until the instance carries the labels. The cluster's
// NetworkPolicies, spreads and anti-affinity select launcher pods by them:
// without them, the instance the community provider started is cut off
// from the cluster's new VMs by its isolation policies (docs/isolation.md).
// KubeVirt gives template labels only to the next instance, renders a
// launcher pod's labels from its instance's, and afterwards syncs only its
// own keys from an instance to its pod (syncDynamicAnnotationsAndLabelsToPod
// in pkg/virt-controller/watch/vmi/lifecycle.go, KubeVirt v1.7.0), so the
// running instance and its pods are labelled here. Only the instance the
// VM controls, and the pods that instance controls, are written; the
// instance last, as the sign that all its pods are done.
//
// An infra cluster that does not let the provider list or patch pods (an
// external one whose kubeconfig lacks the rights) gets a Warning Event
// instead: the machine works on, and the next instance has the labels.
func (s *Service) labelInstance(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	if !adoption.Adopted(vm) || vmi == nil || !metav1.IsControlledBy(vmi, vm) || vmi.Labels[infrav1.KubevirtMachineNamespaceLabel] != "" {
		return nil
	}
	labels := adoptedLabels(sc, vm.Name)
	pods := &corev1.PodList{}
	err := sc.Access.Infra.APIReader.List(ctx, pods, client.InNamespace(vm.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})
	for i := range pods.Items {
		if pod := &pods.Items[i]; err == nil && metav1.IsControlledBy(pod, vmi) {
			err = client.IgnoreNotFound(addMetadata(ctx, sc.Access.Infra.Client, pod, labels, nil))
		}
	}
	if err == nil {
		// At the resourceVersion read: a cached instance that has since
		// been replaced under the same name must not mark its successor.
		vmi = vmi.DeepCopy()
		err = addMetadata(ctx, sc.Access.Infra.Client, vmi, labels, map[string]string{adoption.AdoptedFromAnnotation: adoption.CommunityProvider},
			client.MergeFromWithOptimisticLock{})
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// The instance changed or went; its watch brings the machine back.
		return nil
	}
	if apierrors.IsForbidden(err) {
		s.Recorder.Eventf(sc.KubevirtMachine, vm, corev1.EventTypeWarning, instanceNotLabelledReason, "Label",
			"the running instance of adopted VirtualMachine %s/%s and its launcher pods keep the community provider's labels until it restarts, so the cluster's NetworkPolicies do not select them: %v", vm.Namespace, vm.Name, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("labelling the running instance of adopted VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

// instanceNotLabelledReason is the Warning Event of an adopted instance the
// provider may not label.
const instanceNotLabelledReason = "AdoptedInstanceNotLabelled"

// addMetadata merges labels and annotations into obj's, writing only when
// one differs.
func addMetadata(ctx context.Context, c client.Client, obj client.Object, labels, annotations map[string]string, opts ...client.MergeFromOption) error {
	before := obj.DeepCopyObject().(client.Object)
	obj.SetLabels(overlay(obj.GetLabels(), labels))
	obj.SetAnnotations(overlay(obj.GetAnnotations(), annotations))
	if maps.Equal(before.GetLabels(), obj.GetLabels()) && maps.Equal(before.GetAnnotations(), obj.GetAnnotations()) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, opts...)); err != nil {
		return fmt.Errorf("labelling %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// overlay is base with extra on top, as a new map (adoption.withAll keeps
// base's values instead).
func overlay(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
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
// user data Secret of this machine it boots from, so that it goes with the
// VM, and returns the names of the Secrets adopted.
func (s *Service) adoptCommunityUserData(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, owner string) ([]string, error) {
	bootstrap := ptr.Deref(sc.Machine.Spec.Bootstrap.DataSecretName, "")
	var adopted []string
	for _, name := range adoption.UserDataSecrets(vm) {
		secret := &corev1.Secret{}
		found, err := get(ctx, sc.Access.Infra.APIReader, types.NamespacedName{Namespace: vm.Namespace, Name: name}, secret)
		if err != nil {
			return nil, err
		}
		if !found || !adoption.CommunityUserData(secret, secret.Type, sc.Cluster.Name, bootstrap) {
			continue
		}
		before := secret.DeepCopy()
		ownedobject.Mark(secret, owner)
		// The VM's UID is known before its own patch: the Secret goes with
		// it whether or not that patch succeeds now.
		secret.OwnerReferences = append(secret.OwnerReferences, vmOwnerReference(vm))
		if err := sc.Access.Infra.Client.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, fmt.Errorf("adopting user data Secret %s/%s: %w", secret.Namespace, name, err)
		}
		adopted = append(adopted, name)
	}
	return adopted, nil
}

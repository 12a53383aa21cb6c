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

// This file creates a machine's VM and, right after it, the user data
// Secret the VM boots from.

package machine

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// create writes the VM and its user data Secret, once the golden image,
// the bootstrap data and the clone permission are there. The outcome says
// what it waits for.
func (s *Service) create(ctx context.Context, sc *Scope, key types.NamespacedName, found *findings) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	infra := sc.Access.Infra
	if refused, err := s.guestAllowed(ctx, sc, key.Namespace); err != nil || refused.Reason != "" {
		return refused, err
	}
	// The import starts before bootstrap data exists: workers get theirs
	// only once the control plane is up, and the download need not wait.
	goldenVolume, wait, err := s.goldenVolume(ctx, sc)
	if err != nil {
		return wait, err
	}
	if goldenVolume == nil && goldenplan.Needed(km.Spec.RootDisk) {
		// A worker waits for its control plane longer than for the
		// import: that is the wait to show, unless the import failed.
		if sc.Machine.Spec.Bootstrap.DataSecretName == nil && wait.State != outcome.Failed {
			return bootstrapdata.Waiting("Machine"), nil
		}
		return wait, nil
	}
	if !sc.FinalizerStored {
		// Nothing that could outlive the machine is created before its
		// finalizer is stored; the write of the finalizer brings it back.
		if sc.Machine.Spec.Bootstrap.DataSecretName == nil {
			return bootstrapdata.Waiting("Machine"), nil
		}
		return outcome.Wait(infrav1.PendingReason, "the VirtualMachine is created once the machine's finalizer is stored"), nil
	}
	data, wait, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return wait, err
	}
	if wait, err := goldenkeeper.CloneAuthorized(ctx, infra, km, sc.VM.Namespace, s.recheck()); err != nil || !wait.IsDone() {
		return wait, err
	}
	numa, unsupported, err := s.presetSupport(ctx, sc)
	if err != nil || unsupported.Reason != "" {
		return unsupported, err
	}
	in := vmbuilder.Input{
		Name: key.Name, Namespace: key.Namespace, Spec: km.Spec, KubevirtMachineNamespace: km.Namespace,
		ClusterName: sc.Cluster.Name, MachineName: sc.Machine.Name,
		MachineDeployment: sc.Machine.Labels[clusterv1.MachineDeploymentNameLabel],
		ControlPlane:      util.IsControlPlaneMachine(sc.Machine), FailureDomain: sc.Machine.Spec.FailureDomain,
		UserDataSecret: sc.UserData.Name, Format: data.Format,
		HasNetworkData: data.NetworkData != nil || (len(data.assigned) > 0 && data.Format != userdata.FormatIgnition),
		GoldenVolume:   goldenVolume, NUMAPassthrough: numa, InterfaceMAC: interfaceMAC(sc),
	}
	if sc.KubevirtCluster != nil {
		kc := sc.KubevirtCluster
		in.FailureDomainSelector = failuredomains.Selector(kc.Spec.FailureDomains, in.FailureDomain)
		in.ClusterNetworks = tenantnet.ClusterNetworks(kc, infra.Namespace)
		in.DNSPolicy, in.DNSConfig = kc.Spec.DNSPolicy, kc.Spec.DNSConfig
	}
	if !infra.External && key.Namespace == km.Namespace {
		// An owner in another namespace counts as missing for the garbage
		// collector, which would delete the VM at once.
		in.Owner = metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine"))
	}
	vm, err := vmbuilder.Build(in)
	if err != nil {
		return outcome.Fail(infrav1.CreateFailedReason, err.Error()), nil
	}
	if o := guestNetwork(sc, data, vm, true); o.Reason != "" {
		return o, nil
	}
	if conflict, err := s.userDataConflict(ctx, sc); err != nil || conflict.State == outcome.Failed {
		return conflict, err
	}
	if err := infra.Client.Create(ctx, vm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Ours, created by an earlier reconcile the cache has not seen
			// yet: its watch event follows.
			return outcome.Wait(infrav1.PendingReason, fmt.Sprintf("VirtualMachine %s exists, waiting for its status", key)), nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			return outcome.Fail(infrav1.CreateFailedReason, "the infra cluster refused the VirtualMachine: "+err.Error()), nil
		}
		// The infra API server failed (a webhook of KubeVirt's down, an
		// etcd timeout): the machine says so, and the error brings it back
		// with the controller's bounded backoff. The message stays the same
		// from one retry to the next, and so costs no write.
		err = fmt.Errorf("creating VirtualMachine %s: %w", key, err)
		return outcome.Fail(infrav1.CreateFailedReason, "retrying with backoff: "+err.Error()), err
	}
	// No Event here: the Provisioned Event names the VM and its infra
	// cluster, and an Event per machine for a step the condition shows
	// anyway is a write per machine (docs/machines.md).
	km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	found.waitForInstance()
	// The Secret follows the VM, so that it is created with its owner and
	// never written twice; the instance's pod mounts it and waits for it
	// (docs/kubevirt-behaviour.md#cloud-init-secret-keys).
	if o, err := s.ensureUserDataSecret(ctx, sc, data, vm); err != nil || !o.IsDone() {
		return o, err
	}
	return outcome.Wait(infrav1.PendingReason, "VirtualMachine created, waiting for KubeVirt"), nil
}

// ensureUserDataSecret creates the user data Secret beside its VM, owned by
// it, so that it goes with the VM even if the provider is not there to
// delete it. An existing one of this machine is kept (bootstrap data of a
// machine does not change) and made the VM's; a same-named Secret of
// someone else is reported, never reused.
func (s *Service) ensureUserDataSecret(ctx context.Context, sc *Scope, data *bootstrapData, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: sc.UserData.Name, Namespace: sc.VM.Namespace,
			// Not Cluster API's cluster-name label: it marks the cluster's
			// own Secrets (certificates, kubeconfig, bootstrap data), which a
			// KubeadmControlPlane takes over when it adopts the control
			// plane's machines. The machine's labels and the owner
			// annotation identify this one.
			Labels: map[string]string{
				infrav1.KubevirtMachineLabel:          km.Name,
				infrav1.KubevirtMachineNamespaceLabel: km.Namespace,
			},
			Annotations:     map[string]string{infrav1.OwnerAnnotation: vmbuilder.OwnerOf(km.Namespace, km.Name)},
			OwnerReferences: []metav1.OwnerReference{vmOwnerReference(vm)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: bootstrapdata.SecretData(data.userData, data.NetworkData),
	}
	for k, v := range secret.Labels {
		if len(validation.IsValidLabelValue(v)) > 0 {
			delete(secret.Labels, k)
		}
	}
	if data.hostPublicKey != "" {
		secret.Data[bootstrapdata.HostPublicKeyKey] = []byte(data.hostPublicKey)
	}
	err := sc.Access.Infra.Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := sc.Access.Infra.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
			return outcome.Outcome{}, err
		}
		if !s.ours(km, existing) {
			return nameConflict(secret), nil
		}
		return outcome.Ready("", ""), s.adoptUserData(ctx, sc, existing, vm)
	}
	if err != nil {
		return outcome.Outcome{}, fmt.Errorf("creating user data Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return outcome.Ready("", ""), nil
}

func nameConflict(secret client.Object) outcome.Outcome {
	return bootstrapdata.NameConflict(client.ObjectKeyFromObject(secret), "KubevirtMachine")
}

func vmOwnerReference(vm *kubevirtv1.VirtualMachine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
		BlockOwnerDeletion: ptr.To(false)}
}

// adoptUserData makes the VM own its user data Secret where it does not
// yet, and brings a reference to the VM at another API version (a restore
// from a backup, an upgrade of KubeVirt) or to an earlier VM of the same
// name back to this one: the garbage collector resolves the owner by its
// API version and UID.
func (s *Service) adoptUserData(ctx context.Context, sc *Scope, secret client.Object, vm *kubevirtv1.VirtualMachine) error {
	want := vmOwnerReference(vm)
	if util.HasExactOwnerRef(secret.GetOwnerReferences(), want) {
		return nil
	}
	before := secret.DeepCopyObject().(client.Object)
	secret.SetOwnerReferences(util.EnsureOwnerRef(slices.Clone(secret.GetOwnerReferences()), want))
	// The copy may come from the cache: a stale one must not replace
	// owners added since, so the patch carries its resourceVersion.
	if err := sc.Access.Infra.Client.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("making VirtualMachine %s own its user data Secret: %w", vm.Name, err)
	}
	return nil
}

// existingUserData reads the metadata of the machine's user data Secret, nil
// when there is none. On the management cluster it reads the manager's
// cache, which watches Secret metadata anyway, so that a reconcile costs no
// request; an external infra cluster is read directly, as the provider may
// not be allowed to watch Secrets there.
func existingUserData(ctx context.Context, sc *Scope) (client.Object, error) {
	var secret client.Object = &corev1.Secret{}
	reader := sc.Access.Infra.APIReader
	if !sc.Access.Infra.External {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		secret, reader = meta, sc.Access.Infra.Cache
	}
	found, err := get(ctx, reader, sc.UserData, secret)
	if err != nil || !found {
		return nil, err
	}
	return secret, nil
}

// userDataConflict checks, before the VM is created, that no one else's
// Secret has the name of the machine's user data: the VM would boot with it.
func (s *Service) userDataConflict(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	secret, err := existingUserData(ctx, sc)
	if err != nil || secret == nil || s.ours(sc.KubevirtMachine, secret) {
		return outcome.Ready("", ""), err
	}
	return nameConflict(secret), nil
}

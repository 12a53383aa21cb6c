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
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

type bootstrapData struct {
	*bootstrapdata.Data
	// userData is what the VM boots from: the bootstrap data rendered with
	// the provider's additions.
	userData      []byte
	hostPublicKey string
	// assigned are the machine's pool addresses, which guestNetwork adds
	// once the VM's interfaces are known; additions let it render the user
	// data again with them.
	assigned  []ipam.Assigned
	additions userdata.Additions
}

// userData gathers the bootstrap data of the machine. It returns nil, with
// an outcome saying why, while something is missing.
func (s *Service) userData(ctx context.Context, sc *Scope) (*bootstrapData, outcome.Outcome, error) {
	km := sc.KubevirtMachine
	read, wait, err := bootstrapdata.Read(ctx, s.Client, km.Namespace, sc.Machine.Spec.Bootstrap.DataSecretName,
		km.Spec.UserData.NetworkDataSecretRef, "Machine")
	if err != nil || read == nil {
		return nil, wait, err
	}
	data := &bootstrapData{Data: read}
	if km.Spec.BootstrapCheckSpec.CheckStrategy == infrav1.CheckStrategySSH {
		clientKeys, err := s.clusterSSHKeys(ctx, sc)
		if err != nil {
			return nil, outcome.Outcome{}, err
		}
		host, err := sshcheck.NewKeyPair()
		if err != nil {
			return nil, outcome.Outcome{}, err
		}
		data.additions = userdata.Additions{SSHHostKey: host.Private, SSHHostPublicKey: host.Public,
			SSHUser: SSHUser, SSHAuthorizedKeys: []string{clientKeys.Public}}
		data.hostPublicKey = host.Public
	}
	if data.assigned, wait, err = s.staticAddresses(ctx, sc); err != nil || wait.Reason != "" {
		return nil, wait, err
	}
	if data.userData, wait = data.Render(data.additions); data.userData == nil {
		return nil, wait, nil
	}
	return data, outcome.Outcome{}, nil
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
			Name: sc.UserDataSecretName(), Namespace: sc.VMNamespace(),
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
	err := sc.Infra().Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := sc.Infra().APIReader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
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

// existingUserData reads the metadata of the machine's user data Secret, nil
// when there is none. On the management cluster it reads the manager's
// cache, which watches Secret metadata anyway, so that a reconcile costs no
// request; an external infra cluster is read directly, as the provider may
// not be allowed to watch Secrets there.
func existingUserData(ctx context.Context, sc *Scope) (client.Object, error) {
	var secret client.Object = &corev1.Secret{}
	reader := sc.Infra().APIReader
	if !sc.Infra().External {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		secret, reader = meta, sc.Infra().Cache
	}
	found, err := get(ctx, reader, types.NamespacedName{Namespace: sc.VMNamespace(), Name: sc.UserDataSecretName()}, secret)
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

// keepUserData makes sure the VM of a machine still provisioning has its
// user data Secret: one whose create failed after the VM's is created now,
// and one written by an earlier version without an owner is given the VM.
func (s *Service) keepUserData(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	secret, err := existingUserData(ctx, sc)
	switch {
	case err != nil:
		return outcome.Outcome{}, err
	case secret != nil:
		if !s.ours(sc.KubevirtMachine, secret) {
			return outcome.Ready("", ""), nil
		}
		return outcome.Ready("", ""), s.adoptUserData(ctx, sc, secret, vm)
	case provisioned(sc.KubevirtMachine) || sc.Machine == nil:
		return outcome.Ready("", ""), nil
	}
	// The Secret was created right after the VM, and the cache may not
	// have seen it yet when the VM's event brings the machine here.
	found, err := get(ctx, sc.Infra().APIReader, types.NamespacedName{Namespace: sc.VMNamespace(), Name: sc.UserDataSecretName()}, &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}})
	if err != nil || found {
		return outcome.Ready("", ""), err
	}
	data, wait, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return wait, err
	}
	if o := guestNetwork(sc, data, vm, false); o.Reason != "" {
		return o, nil
	}
	return s.ensureUserDataSecret(ctx, sc, data, vm)
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
	if err := sc.Infra().Client.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("making VirtualMachine %s own its user data Secret: %w", vm.Name, err)
	}
	return nil
}

// reconcileUserData keeps the VM's user data Secret (keepUserData); a
// pool's VMs share their pool's.
func (s *Service) reconcileUserData(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	if sc.PoolVMUID() != "" {
		return outcome.Outcome{}, false, nil
	}
	if o, err := s.keepUserData(ctx, sc, r.vm); err != nil || !o.IsDone() {
		r.found.vm = &o
		return o, true, err
	}
	return outcome.Outcome{}, false, nil
}

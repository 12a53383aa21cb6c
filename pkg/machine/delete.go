package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
)

// Delete removes what the machine has on the infra cluster, in order: the
// VM (KubeVirt deletes its instance), then, once VM and instance are gone,
// the DataVolumes of its templates and the user data Secret. It reports done
// when nothing is left, so the finalizer can go. Each step waits for the
// watch event of the previous one.
//
// withCDI is false when the infra cluster lacks CDI: then there are no
// DataVolumes to delete.
func (s *Service) Delete(ctx context.Context, sc *Scope, withCDI bool) (bool, error) {
	km := sc.KubevirtMachine
	ns := sc.VMNamespace()
	key := types.NamespacedName{Namespace: ns, Name: sc.VMName()}

	vm := &kubevirtv1.VirtualMachine{}
	found, err := get(ctx, sc.Infra.APIReader, key, vm)
	if err != nil {
		return false, err
	}
	if found && s.ours(km, vm) {
		if vm.DeletionTimestamp.IsZero() {
			if err := sc.Infra.Client.Delete(ctx, vm, client.Preconditions{UID: &vm.UID}); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting VirtualMachine %s: %w", key, err)
			}
			s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, "VirtualMachineDeleting", "DeleteVirtualMachine", "deleting VirtualMachine %s", key)
		}
		s.deleting(km, fmt.Sprintf("waiting for VirtualMachine %s to be deleted", key))
		return false, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if found, err := get(ctx, sc.Infra.APIReader, key, vmi); err != nil || found && s.ours(km, vmi) {
		s.deleting(km, fmt.Sprintf("waiting for VirtualMachineInstance %s to be deleted", key))
		return false, err
	}
	pending := 0
	for _, name := range dataVolumeNames(km) {
		if !withCDI {
			break
		}
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, sc.Infra.APIReader, types.NamespacedName{Namespace: ns, Name: vmbuilder.DataVolumeName(key.Name, name)}, dv)
		if err != nil {
			return false, err
		}
		if !found || !s.ours(km, dv) {
			continue
		}
		pending++
		// Garbage collection would get there too; deleting here means
		// nothing is left once the machine is gone.
		if dv.DeletionTimestamp.IsZero() {
			if err := sc.Infra.Client.Delete(ctx, dv, client.Preconditions{UID: &dv.UID}); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting DataVolume %s/%s: %w", ns, dv.Name, err)
			}
		}
	}
	if pending > 0 {
		s.deleting(km, fmt.Sprintf("waiting for %d DataVolume(s) of VirtualMachine %s to be deleted", pending, key))
		return false, nil
	}
	secret := &corev1.Secret{}
	found, err = get(ctx, sc.Infra.APIReader, types.NamespacedName{Namespace: ns, Name: sc.UserDataSecretName()}, secret)
	if err != nil {
		return false, err
	}
	if found && s.ours(km, secret) {
		if err := sc.Infra.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting user data Secret %s/%s: %w", ns, secret.Name, err)
		}
	}
	return true, nil
}

// ours reports whether an infra object was made for this KubevirtMachine; a
// same-named object of someone else is never deleted or reused.
func (s *Service) ours(km *infrav1.KubevirtMachine, obj client.Object) bool {
	return obj.GetAnnotations()[infrav1.OwnerAnnotation] == vmbuilder.OwnerOf(km.Namespace, km.Name)
}

func (s *Service) deleting(km *infrav1.KubevirtMachine, message string) {
	s.SetVMCondition(km, infrav1.DeletingReason, message)
}

// dataVolumeNames are the DataVolume templates of the machine's VM, before
// the VM-name prefix: the user's, the root disk and the data disks.
func dataVolumeNames(km *infrav1.KubevirtMachine) []string {
	var names []string
	for _, t := range km.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates {
		names = append(names, t.Name)
	}
	if km.Spec.RootDisk != nil {
		names = append(names, golden.RootDiskName)
	}
	for _, d := range km.Spec.DataDisks {
		names = append(names, d.Name)
	}
	return names
}

package machine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
)

// Delete removes what the machine has on the infra cluster, in order: the
// VM (KubeVirt deletes its instance), then, once VM and instance are gone,
// the DataVolumes of its templates and the user data Secret. It reports done
// when nothing is left, so the finalizer can go. Each step waits for the
// watch event of the previous one.
func (s *Service) Delete(ctx context.Context, sc *Scope) (bool, error) {
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
		deleting(km, fmt.Sprintf("waiting for VirtualMachine %s to be deleted", key))
		return false, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if found, err := get(ctx, sc.Infra.APIReader, key, vmi); err != nil || found && s.ours(km, vmi) {
		deleting(km, fmt.Sprintf("waiting for VirtualMachineInstance %s to be deleted", key))
		return false, err
	}
	pending := 0
	for _, t := range km.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, sc.Infra.APIReader, types.NamespacedName{Namespace: ns, Name: vmbuilder.DataVolumeName(key.Name, t.Name)}, dv)
		if err != nil {
			return false, err
		}
		if !found || !ownedByVM(dv, key.Name) {
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
		deleting(km, fmt.Sprintf("waiting for %d DataVolume(s) of VirtualMachine %s to be deleted", pending, key))
		return false, nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sc.UserDataSecretName()}}
	if err := sc.Infra.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("deleting user data Secret %s/%s: %w", ns, secret.Name, err)
	}
	return true, nil
}

// ours reports whether an infra object was made for this KubevirtMachine; a
// same-named object of someone else is never deleted.
func (s *Service) ours(km *infrav1.KubevirtMachine, obj client.Object) bool {
	l := obj.GetLabels()
	return l[infrav1.KubevirtMachineLabel] == km.Name && l[infrav1.KubevirtMachineNamespaceLabel] == km.Namespace
}

func ownedByVM(obj client.Object, vmName string) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.Kind == "VirtualMachine" && o.Name == vmName {
			return true
		}
	}
	return false
}

func deleting(km *infrav1.KubevirtMachine, message string) {
	conditions.Set(km, metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.DeletingReason, Message: message})
}

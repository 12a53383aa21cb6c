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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// Delete removes what the machine has on the infra cluster and reports done
// when nothing is left, so the finalizer can go. An infra cluster without
// KubeVirt's API cannot hold a VM of the machine; one that cannot be used
// otherwise keeps the machine waiting, since its VM may still run there.
func (s *Service) Delete(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	found := &findings{}
	defer s.writeStatus(km, found)
	access := sc.Access
	switch {
	case sc.PoolVMUID() != "" && (access.Available() || access.Outcome.Reason == infrav1.CDINotInstalledReason):
		// A pool's VM: the pool made it and its disks, and keeps them.
		o, err := s.deletePoolInstance(ctx, sc)
		if err != nil || !o.IsDone() {
			found.vm = &o
			return o, err
		}
	case access.Available(), access.Outcome.Reason == infrav1.CDINotInstalledReason:
		// Without CDI there are no DataVolumes to wait for, but the VM may
		// exist.
		o, err := s.deleteObjects(ctx, sc, access.Available())
		if err != nil {
			return outcome.Outcome{}, err
		}
		if !o.IsDone() {
			found.vm = &o
			return o, nil
		}
	case access.Outcome.Reason == infrav1.KubeVirtNotInstalledReason:
	case access.Outcome.Reason == infrav1.NotAllowedByPolicyReason && !vmCreated(km):
		// Refused before its VM was created: nothing to delete.
	default:
		o := outcome.Wait(infrav1.DeletingReason,
			"cannot delete the VM until the infra cluster can be used: "+access.Outcome.Message).After(access.Outcome.RequeueAfter)
		found.vm = &o
		return o, nil
	}
	// The addresses go back to their pools only now, when no VM uses them.
	if err := (&ipam.Claims{Client: s.Client}).Release(ctx, km); err != nil {
		return outcome.Outcome{}, err
	}
	s.Recorder.Eventf(km, nil, corev1.EventTypeNormal, "Deleted", "DeleteVirtualMachine", "VirtualMachine and its objects are gone")
	return outcome.Ready(clusterv1.DeletionCompletedReason, "VirtualMachine and its objects are gone"), nil
}

// deleteObjects deletes in order: the VM (KubeVirt deletes its instance),
// then, once VM and instance are gone, the DataVolumes of its templates and
// the user data Secret. Each step waits for the watch event of the previous
// one. withCDI is false when the infra cluster lacks CDI: then there are no
// DataVolumes to delete.
func (s *Service) deleteObjects(ctx context.Context, sc *Scope, withCDI bool) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	key := sc.VM

	vm := &kubevirtv1.VirtualMachine{}
	found, err := get(ctx, sc.Access.Infra.APIReader, key, vm)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if found && s.ours(km, vm) {
		if vm.DeletionTimestamp.IsZero() {
			if err := sc.Access.Infra.Client.Delete(ctx, vm, client.Preconditions{UID: &vm.UID}); client.IgnoreNotFound(err) != nil {
				return outcome.Outcome{}, fmt.Errorf("deleting VirtualMachine %s: %w", key, err)
			}
			s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, "VirtualMachineDeleting", "DeleteVirtualMachine", "deleting VirtualMachine %s", key)
		}
		return s.waitForInstance(ctx, sc, key, fmt.Sprintf("waiting for VirtualMachine %s to be deleted", key))
	}
	if found && adoption.CommunityVM(vm, communityMachine(sc)) {
		// The community provider's VM, never adopted (adopt.go marks it
		// last): its instance, disks and Secret may carry this machine's
		// marks, but they are that VM's, which lives on.
		return outcome.Ready(infrav1.DeletingReason, fmt.Sprintf("VirtualMachine %s, the community provider's, was never adopted and is left as it is", key)), nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if found, err := get(ctx, sc.Access.Infra.APIReader, key, vmi); err != nil || found && s.ours(km, vmi) {
		if err != nil {
			return outcome.Outcome{}, err
		}
		return s.waitForInstance(ctx, sc, key, fmt.Sprintf("waiting for VirtualMachineInstance %s to be deleted", key))
	}
	return s.deleteLeftovers(ctx, sc, key, withCDI)
}

// waitForInstance waits for KubeVirt to delete the VM and its instance,
// unless the instance sits on an infra node that is gone or unreachable:
// nothing there can confirm the guest stopped, so KubeVirt would wait for
// the node forever, and so would the Machine's replacement. Then the VM is
// left marked for deletion (its owner references let the garbage collector
// finish once KubeVirt does) and the machine's own objects go.
func (s *Service) waitForInstance(ctx context.Context, sc *Scope, key types.NamespacedName, message string) (outcome.Outcome, error) {
	node, why, err := s.strandedOn(ctx, sc, key)
	if err != nil || why == "" {
		// The instance's events bring the machine back; the node's do not.
		return deleting(message).After(strandedRecheck), err
	}
	km := sc.KubevirtMachine
	s.Recorder.Eventf(km, nil, corev1.EventTypeWarning, "VirtualMachineStranded", "DeleteVirtualMachine",
		"infra node %s %s: VirtualMachine %s stays marked for deletion until KubeVirt can finish, the machine does not wait for it", node, why, key)
	return s.deleteLeftovers(ctx, sc, key, false)
}

// deleteLeftovers deletes the VM's DataVolumes (when withCDI) and its user
// data Secret.
func (s *Service) deleteLeftovers(ctx context.Context, sc *Scope, key types.NamespacedName, withCDI bool) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	ns := key.Namespace
	pending := 0
	for _, name := range dataVolumeNames(km) {
		if !withCDI {
			break
		}
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, sc.Access.Infra.APIReader, types.NamespacedName{Namespace: ns, Name: vmbuilder.DataVolumeName(key.Name, name)}, dv)
		if err != nil {
			return outcome.Outcome{}, err
		}
		if !found || !s.ours(km, dv) {
			continue
		}
		pending++
		// Garbage collection would get there too; deleting here means
		// nothing is left once the machine is gone.
		if dv.DeletionTimestamp.IsZero() {
			if err := sc.Access.Infra.Client.Delete(ctx, dv, client.Preconditions{UID: &dv.UID}); client.IgnoreNotFound(err) != nil {
				return outcome.Outcome{}, fmt.Errorf("deleting DataVolume %s/%s: %w", ns, dv.Name, err)
			}
		}
	}
	if pending > 0 {
		return deleting(fmt.Sprintf("waiting for %d DataVolume(s) of VirtualMachine %s to be deleted", pending, key)), nil
	}
	secret := &corev1.Secret{}
	found, err := get(ctx, sc.Access.Infra.APIReader, sc.UserData, secret)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if found && s.ours(km, secret) {
		if err := sc.Access.Infra.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
			return outcome.Outcome{}, fmt.Errorf("deleting user data Secret %s/%s: %w", ns, secret.Name, err)
		}
	}
	return outcome.Ready(infrav1.DeletingReason, "the VM's objects are deleted"), nil
}

// ours reports whether an infra object was made for this KubevirtMachine; a
// same-named object of someone else is never deleted or reused.
func (s *Service) ours(km *infrav1.KubevirtMachine, obj client.Object) bool {
	return obj.GetAnnotations()[infrav1.OwnerAnnotation] == vmbuilder.OwnerOf(km.Namespace, km.Name)
}

func deleting(message string) outcome.Outcome {
	return outcome.Wait(infrav1.DeletingReason, message)
}

// dataVolumeNames are the DataVolume templates of the machine's VM, before
// the VM-name prefix: the user's, the root disk and the data disks.
func dataVolumeNames(km *infrav1.KubevirtMachine) []string {
	var names []string
	for _, t := range km.Spec.VirtualMachineTemplate.Spec.DataVolumeTemplates {
		names = append(names, t.Name)
	}
	if km.Spec.RootDisk != nil {
		names = append(names, goldenplan.RootDiskName)
	}
	for _, d := range km.Spec.DataDisks {
		names = append(names, d.Name)
	}
	return names
}

// strandedRecheck is how often a deletion that waits for KubeVirt checks
// whether the instance's infra node died meanwhile.
const strandedRecheck = 30 * time.Second

// strandedOn names the infra node of the machine's instance and why
// KubeVirt cannot finish there (gone, unreachable, out of service); why is
// empty when the node is fine or the instance has none.
func (s *Service) strandedOn(ctx context.Context, sc *Scope, key types.NamespacedName) (string, string, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	found, err := get(ctx, sc.Access.Infra.APIReader, key, vmi)
	if err != nil || !found || vmi.Status.NodeName == "" || vmstatus.Finished(vmi) {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, infraReadTimeout)
	defer cancel()
	node := &corev1.Node{}
	if err := sc.Access.Infra.APIReader.Get(ctx, types.NamespacedName{Name: vmi.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return vmi.Status.NodeName, "is gone", nil
		}
		// Not allowed to read Nodes, or not now: wait for KubeVirt.
		return "", "", nil
	}
	for _, t := range node.Spec.Taints {
		switch {
		case t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute:
			return node.Name, "is unreachable", nil
		case t.Key == corev1.TaintNodeOutOfService:
			return node.Name, "is out of service", nil
		}
	}
	return "", "", nil
}

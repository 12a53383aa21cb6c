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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/quotaretry"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// reconcileReport reports the VM's state and runs the bootstrap check; it
// always ends the reconcile.
func (s *Service) reconcileReport(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	o, err := s.report(ctx, sc, r.vm, r.vmi, &r.found)
	return o.After(outcome.Sooner(o.RequeueAfter, r.requeue)), true, err
}

// report reads the VM's disks and instance into what VirtualMachineReady
// says, and runs the bootstrap check once the instance runs.
func (s *Service) report(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, found *findings) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	infra := sc.Access.Infra
	var dvs []*cdiv1.DataVolume
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, infra.Client, types.NamespacedName{Namespace: vm.Namespace, Name: t.Name}, dv)
		if err != nil {
			return outcome.Outcome{}, err
		}
		if found {
			dvs = append(dvs, dv)
		}
	}
	// An adopted VM has no root disk from a golden image (adopt.go
	// refuses a machine that asks for one).
	golden := goldenplan.Needed(km.Spec.RootDisk) && !adoption.Adopted(vm)
	if golden {
		km.Status.GoldenImage = goldenplan.StatusOf(infra.Secret, sc.VM.Namespace, km.Spec.RootDisk)
	}
	// A pool's VMs clone the golden volume their pool keeps.
	if golden && !rootDiskCloned(vm, dvs) && sc.PoolVMUID() == "" {
		if err := goldenkeeper.Recreate(ctx, infra.Client, s.Recorder, km, km.Spec.RootDisk, sc.VM.Namespace); err != nil {
			return outcome.Outcome{}, err
		}
	}
	state := countFreeDevices(ctx, sc, vmi, vmstatus.Of(vm, vmi, dvs))
	if err := quotaretry.RetryRefused(ctx, infra, vmi, dvs); err != nil {
		// The refusal is reported either way; KubeVirt and CDI then retry
		// on their own backoff (docs/operations.md#quota).
		ctrl.LoggerFrom(ctx).Info("Cannot ask for a retry of what a quota refused", "error", err.Error())
	}
	nodeNetwork := ""
	if vmi != nil {
		nodeNetwork = vmstatus.NodeNetwork(vmi, tenantnet.NodeAddressNetwork(sc.KubevirtCluster, km))
		if names := vmstatus.NetworkNames(vmi); !slices.Contains(names, nodeNetwork) {
			state = vmstatus.State{Running: state.Running, Reason: infrav1.NodeNetworkNotFoundReason, Warning: true,
				Message: fmt.Sprintf("nodeAddressNetwork %q is not a network of the VM; it has %v", nodeNetwork, names)}
		} else if state.Ready && !vmstatus.HasNodeAddress(vmi, nodeNetwork) {
			// KubeVirt can report an interface before its IP
			// (docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
			state = vmstatus.State{Running: true, Reason: infrav1.BootingReason,
				Message: fmt.Sprintf("VM instance is ready but network %q has no IP address yet", nodeNetwork)}
		}
		if state.Running {
			found.addresses = toMachineAddresses(vmstatus.Addresses(vmi, nodeNetwork))
		}
	}
	if state.Ready && adoption.Adopted(vm) && vmi != nil && adoption.CommunityInstance(vmi) {
		// Said while the instance the community provider started runs, as
		// it booted then (docs/migrating-from-capk.md).
		state.Reason = infrav1.AdoptedReason
	}
	vmOutcome := fromState(state)
	found.vm = &vmOutcome
	if vmi != nil && vmi.Status.NodeName != "" {
		failureDomain := sc.failureDomain()
		found.failureDomain = &failureDomain
	}
	if !state.Running {
		found.waitForInstance()
		return vmOutcome, nil
	}
	check := s.checkBootstrap(ctx, sc, vm, vmi, state, found)
	if !check.IsDone() || !state.Ready {
		check = check.After(outcome.Sooner(check.RequeueAfter, s.reportNodeJoin(sc, vmi, "", found).RequeueAfter))
		found.notReady = true
		if vmOutcome.IsDone() {
			return check, nil
		}
		return vmOutcome.After(check.RequeueAfter), nil
	}
	if !provisioned(km) && s.Status.FirstProvisioned(km, cloneMethod(vm, dvs), time.Now()) {
		s.Recorder.Eventf(km, vmi, corev1.EventTypeNormal, "Provisioned", "ProvisionVirtualMachine",
			"VirtualMachine %s/%s on the %s runs and its bootstrap succeeded", vm.Namespace, vm.Name, sc.Access.Infra.Description())
	}
	found.provisioned = true
	// The Node is usually there by now (kubeadm join finished before the
	// bootstrap succeeded), so that NodeJoined goes with the same write.
	node, err := s.syncTenantNode(ctx, sc, vmi)
	if err != nil {
		return outcome.Outcome{}, err
	}
	return check.After(outcome.Sooner(check.RequeueAfter, s.reportNodeJoin(sc, vmi, node, found).RequeueAfter)), nil
}

// fromState is the outcome of a VM state read from KubeVirt and CDI.
func fromState(st vmstatus.State) outcome.Outcome {
	switch {
	case st.Ready:
		return outcome.Ready(st.Reason, st.Message)
	case st.Warning:
		return outcome.Fail(st.Reason, st.Message)
	}
	return outcome.Wait(st.Reason, st.Message)
}

// cloneMethod is how CDI cloned the VM's root disk from its golden volume,
// as CDI notes it on the DataVolume: snapshot, csi-clone or copy
// (host-assisted); empty when the disk was not cloned.
func cloneMethod(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) string {
	if dv := rootDataVolume(vm, dvs); dv != nil {
		return dv.Annotations[cloneTypeAnnotation]
	}
	return ""
}

// cloneTypeAnnotation is where CDI records the clone strategy it used
// (its DataVolume clone controller's annCloneType).
const cloneTypeAnnotation = "cdi.kubevirt.io/cloneType"

// rootDiskCloned reports whether the VM's root DataVolume finished.
func rootDiskCloned(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) bool {
	dv := rootDataVolume(vm, dvs)
	return dv != nil && dv.Status.Phase == cdiv1.Succeeded
}

// rootDataVolume is the VM's root disk DataVolume among dvs, or nil.
func rootDataVolume(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) *cdiv1.DataVolume {
	name := vmbuilder.DataVolumeName(vm.Name, goldenplan.RootDiskName)
	for _, dv := range dvs {
		if dv.Name == name {
			return dv
		}
	}
	return nil
}

func (sc *Scope) failureDomain() string {
	if sc.Machine != nil {
		return sc.Machine.Spec.FailureDomain
	}
	return ""
}

func toMachineAddresses(in []vmstatus.Address) []clusterv1.MachineAddress {
	out := make([]clusterv1.MachineAddress, 0, len(in))
	for _, a := range in {
		out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address})
	}
	return out
}

// waitForInstance records a VM whose instance does not run yet: its
// bootstrap waits.
func (f *findings) waitForInstance() {
	bootstrap := outcome.Wait(infrav1.WaitingForBootstrapReason, "waiting for the VM instance to run")
	f.bootstrap, f.notReady = &bootstrap, true
}

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

package sim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// vmFinalizer lets the simulator count VM deletions and delete the VMI, as
// virt-controller does (docs/kubevirt-behaviour.md#run-strategies-and-deletion).
const vmFinalizer = "sim.capkv.io/vm"

func (s *Simulator) setupVMController(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-vm").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&cdiv1.DataVolume{}).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileVM))
}

// reconcileVM plays virt-controller for one VirtualMachine
// (docs/kubevirt-behaviour.md#virtualmachine-and-vmi-controller-behaviour).
func (s *Simulator) reconcileVM(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.client.Get(ctx, req.NamespacedName, vm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !vm.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, s.deleteVM(ctx, vm)
	}
	if controllerutil.AddFinalizer(vm, vmFinalizer) {
		if err := s.client.Update(ctx, vm); err != nil {
			return reconcile.Result{}, err
		}
		s.Counters.Add(VMsCreated, 1)
	}

	ready, err := s.ensureDataVolumes(ctx, vm)
	if err != nil {
		return reconcile.Result{}, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err = s.client.Get(ctx, req.NamespacedName, vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	exists := err == nil && vmi.DeletionTimestamp.IsZero()
	if exists && metav1.IsControlledBy(vmi, vm) {
		if recreate := finished(vmi) && shouldRestart(vm, vmi); recreate || wantsStopped(vm) {
			if err := s.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
			exists = false
		}
	}
	if !exists && err != nil && wantsRunning(vm) && ready {
		if err := s.createVMI(ctx, vm); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, s.updateVMStatus(ctx, vm, ready)
}

func wantsRunning(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.Running != nil {
		return *vm.Spec.Running
	}
	switch *vm.Spec.RunStrategy {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure:
		return true
	case kubevirtv1.RunStrategyOnce:
		// Once starts the VM as long as it has not run and stopped before.
		switch vm.Status.PrintableStatus {
		case "", kubevirtv1.VirtualMachineStatusProvisioning, kubevirtv1.VirtualMachineStatusStarting, kubevirtv1.VirtualMachineStatusRunning:
			return true
		}
	}
	return false
}

func wantsStopped(vm *kubevirtv1.VirtualMachine) bool {
	return vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted ||
		vm.Spec.Running != nil && !*vm.Spec.Running
}

func finished(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
}

// shouldRestart says whether to recreate a VMI: Always restarts any finished
// VMI, RerunOnFailure only a failed one, Once and Manual never
// (docs/kubevirt-behaviour.md#run-strategies-and-deletion).
func shouldRestart(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vm.Spec.Running != nil {
		return *vm.Spec.Running
	}
	switch *vm.Spec.RunStrategy {
	case kubevirtv1.RunStrategyAlways:
		return true
	case kubevirtv1.RunStrategyRerunOnFailure:
		return vmi.Status.Phase == kubevirtv1.Failed
	}
	return false
}

func (s *Simulator) deleteVM(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace}}
	if err := s.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
		return err
	}
	if controllerutil.RemoveFinalizer(vm, vmFinalizer) {
		if err := s.client.Update(ctx, vm); client.IgnoreNotFound(err) != nil {
			return err
		}
		s.Counters.Add(VMsDeleted, 1)
	}
	return nil
}

// ensureDataVolumes creates the DataVolumes of the templates
// (docs/kubevirt-behaviour.md#datavolumes-created-from-templates) and reports
// whether all are ready enough to start the VM
// (docs/kubevirt-behaviour.md#the-vmi-is-built-from-the-vm-template).
func (s *Simulator) ensureDataVolumes(ctx context.Context, vm *kubevirtv1.VirtualMachine) (bool, error) {
	ready := true
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		err := s.client.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: t.Name}, dv)
		if apierrors.IsNotFound(err) {
			if dv, err = s.dataVolumeFromTemplate(ctx, vm, t); err != nil {
				s.event(ctx, vm, corev1.EventTypeWarning, "FailedDataVolumeCreate", err.Error())
				ready = false
				continue
			}
			if src := dv.Spec.Source; src != nil && src.PVC != nil {
				ok, err := s.cloneAllowed(ctx, vm, sourceKey(dv).Namespace)
				if err != nil {
					return false, err
				}
				if !ok {
					s.event(ctx, vm, corev1.EventTypeWarning, "UnauthorizedDataVolumeCreate", fmt.Sprintf(
						"Not authorized to create DataVolume %s: insufficient permissions in clone source namespace %s", dv.Name, sourceKey(dv).Namespace))
					ready = false
					continue
				}
			}
			if err := s.client.Create(ctx, dv); err != nil {
				return false, err
			}
		} else if err != nil {
			return false, err
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded, cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
		default:
			ready = false
		}
	}
	return ready, nil
}

func (s *Simulator) dataVolumeFromTemplate(ctx context.Context, vm *kubevirtv1.VirtualMachine, t kubevirtv1.DataVolumeTemplateSpec) (*cdiv1.DataVolume, error) {
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: t.Name, Namespace: vm.Namespace, Labels: map[string]string{kubevirtv1.CreatedByLabel: string(vm.UID)},
			Annotations: t.Annotations,
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		dv.Labels[k] = v
	}
	if ref := dv.Spec.SourceRef; ref != nil {
		// A DataSource reference is resolved when the DataVolume is made
		// (docs/kubevirt-behaviour.md#datavolumes-created-from-templates).
		ns := vm.Namespace
		if ref.Namespace != nil {
			ns = *ref.Namespace
		}
		ds := &cdiv1.DataSource{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, ds); err != nil {
			return nil, fmt.Errorf("DataSource %s/%s: %w", ns, ref.Name, err)
		}
		switch {
		case ds.Spec.Source.PVC != nil:
			dv.Spec.Source = &cdiv1.DataVolumeSource{PVC: ds.Spec.Source.PVC.DeepCopy()}
		case ds.Spec.Source.Snapshot != nil:
			dv.Spec.Source = &cdiv1.DataVolumeSource{Snapshot: ds.Spec.Source.Snapshot.DeepCopy()}
		default:
			return nil, fmt.Errorf("DataSource %s/%s has no source", ns, ref.Name)
		}
		dv.Spec.SourceRef = nil
	}
	return dv, controllerutil.SetControllerReference(vm, dv, s.client.Scheme())
}

func (s *Simulator) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			Labels: vm.Spec.Template.ObjectMeta.Labels, Annotations: vm.Spec.Template.ObjectMeta.Annotations,
		},
		Spec: *vm.Spec.Template.Spec.DeepCopy(),
	}
	applyVMIDefaults(&vmi.Spec)
	if vm.Spec.Instancetype != nil {
		if err := s.applyInstancetype(ctx, vm, &vmi.Spec); err != nil {
			s.event(ctx, vm, corev1.EventTypeWarning, "FailedCreate", err.Error())
			return nil
		}
	}
	if !hasMemory(&vmi.Spec) {
		// Without memory the VMI is refused and the VM records it
		// (docs/kubevirt-behaviour.md#memory-is-required-and-some-labels-are-reserved).
		s.event(ctx, vm, corev1.EventTypeWarning, "FailedCreate",
			"Error creating VirtualMachineInstance: spec.domain.resources.requests.memory or spec.domain.memory.guest must be set")
		return nil
	}
	if err := controllerutil.SetControllerReference(vm, vmi, s.client.Scheme()); err != nil {
		return err
	}
	if err := s.client.Create(ctx, vmi); err != nil {
		return err
	}
	s.Counters.Add(VMIsCreated, 1)
	return nil
}

func hasMemory(vmi *kubevirtv1.VirtualMachineInstanceSpec) bool {
	if m := vmi.Domain.Memory; m != nil && (m.Guest != nil || m.Hugepages != nil) {
		return true
	}
	_, req := vmi.Domain.Resources.Requests[corev1.ResourceMemory]
	_, lim := vmi.Domain.Resources.Limits[corev1.ResourceMemory]
	return req || lim
}

// applyInstancetype sets the instance type's CPU and memory on the VMI,
// with the guest CPU topology the VM's preference asks for
// (docs/kubevirt-behaviour.md#instance-types-and-preferences).
func (s *Simulator) applyInstancetype(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstanceSpec) error {
	m := vm.Spec.Instancetype
	var spec instancetypev1beta1.VirtualMachineInstancetypeSpec
	if namespacedKind(m.Kind) {
		it := &instancetypev1beta1.VirtualMachineInstancetype{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: m.Name}, it); err != nil {
			return fmt.Errorf("failed to find instancetype %s: %w", m.Name, err)
		}
		spec = it.Spec
	} else {
		it := &instancetypev1beta1.VirtualMachineClusterInstancetype{}
		if err := s.client.Get(ctx, types.NamespacedName{Name: m.Name}, it); err != nil {
			return fmt.Errorf("failed to find cluster instancetype %s: %w", m.Name, err)
		}
		spec = it.Spec
	}
	topology := instancetypev1beta1.Sockets
	if p := vm.Spec.Preference; p != nil {
		pref, err := s.preference(ctx, vm.Namespace, p)
		if err != nil {
			return err
		}
		if pref.CPU != nil && pref.CPU.PreferredCPUTopology != nil {
			topology = *pref.CPU.PreferredCPUTopology
		}
	}
	guest := spec.Memory.Guest.DeepCopy()
	vmi.Domain.CPU = CPUTopology(spec.CPU.Guest, topology)
	vmi.Domain.Memory = &kubevirtv1.Memory{Guest: &guest}
	vmi.Domain.Devices.GPUs = append(vmi.Domain.Devices.GPUs, spec.GPUs...)
	vmi.Domain.Devices.HostDevices = append(vmi.Domain.Devices.HostDevices, spec.HostDevices...)
	return nil
}

func (s *Simulator) preference(ctx context.Context, namespace string, m *kubevirtv1.PreferenceMatcher) (*instancetypev1beta1.VirtualMachinePreferenceSpec, error) {
	if namespacedKind(m.Kind) {
		p := &instancetypev1beta1.VirtualMachinePreference{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: m.Name}, p); err != nil {
			return nil, fmt.Errorf("failed to find preference %s: %w", m.Name, err)
		}
		return &p.Spec, nil
	}
	p := &instancetypev1beta1.VirtualMachineClusterPreference{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: m.Name}, p); err != nil {
		return nil, fmt.Errorf("failed to find cluster preference %s: %w", m.Name, err)
	}
	return &p.Spec, nil
}

// CPUTopology lays out vcpus as KubeVirt does for a preferred topology:
// all as sockets (the default), cores or threads; spread puts two cores on
// each socket when they divide evenly (KubeVirt's default ratio), else all
// as cores; any keeps the default.
func CPUTopology(vcpus uint32, t instancetypev1beta1.PreferredCPUTopology) *kubevirtv1.CPU {
	switch t {
	case instancetypev1beta1.Cores, instancetypev1beta1.DeprecatedPreferCores:
		return &kubevirtv1.CPU{Sockets: 1, Cores: vcpus, Threads: 1}
	case instancetypev1beta1.Threads, instancetypev1beta1.DeprecatedPreferThreads:
		return &kubevirtv1.CPU{Sockets: 1, Cores: 1, Threads: vcpus}
	case instancetypev1beta1.Spread, instancetypev1beta1.DeprecatedPreferSpread:
		if vcpus%2 == 0 {
			return &kubevirtv1.CPU{Sockets: vcpus / 2, Cores: 2, Threads: 1}
		}
		return &kubevirtv1.CPU{Sockets: 1, Cores: vcpus, Threads: 1}
	}
	return &kubevirtv1.CPU{Sockets: vcpus, Cores: 1, Threads: 1}
}

func namespacedKind(kind string) bool {
	k := strings.ToLower(kind)
	return k == "virtualmachineinstancetype" || k == "virtualmachinepreference"
}

func (s *Simulator) updateVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, volumesReady bool) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := s.client.Get(ctx, client.ObjectKeyFromObject(vm), vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	before := vm.Status.DeepCopy()
	vm.Status.Created = err == nil
	vm.Status.Ready = false
	readyCond := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: "VMINotExists"}
	switch {
	case err != nil && !volumesReady:
		vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusProvisioning
	case err != nil && wantsRunning(vm):
		vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
	case err != nil:
		vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	default:
		vm.Status.PrintableStatus = printable(vmi)
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceReady {
				readyCond = kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: c.Status, Reason: c.Reason, Message: c.Message}
				if c.Status == corev1.ConditionTrue {
					vm.Status.Ready = true
				}
			}
		}
	}
	setVMCondition(vm, readyCond)
	if equalVMStatus(before, &vm.Status) {
		return nil
	}
	return s.client.Status().Update(ctx, vm)
}

func printable(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachinePrintableStatus {
	switch vmi.Status.Phase {
	case kubevirtv1.Running:
		return kubevirtv1.VirtualMachineStatusRunning
	case kubevirtv1.Succeeded:
		return kubevirtv1.VirtualMachineStatusStopped
	case kubevirtv1.Failed:
		return kubevirtv1.VirtualMachineStatusCrashLoopBackOff
	}
	return kubevirtv1.VirtualMachineStatusStarting
}

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
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// VMAdmissionPath is where the simulated virt-api validates VirtualMachines.
const VMAdmissionPath = "/sim/validate-virtualmachine"

func (s *Simulator) setupAdmission(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(VMAdmissionPath, admission.WithValidator[*kubevirtv1.VirtualMachine](mgr.GetScheme(), vmAdmitter{s}))
	return nil
}

// vmAdmitter applies virt-api's VirtualMachine checks, and only those: the
// sections of docs/kubevirt-behaviour.md#virtualmachine-admission on
// runStrategy, DataVolume templates, volumes and disks, networks, instance
// types and reserved labels.
type vmAdmitter struct{ s *Simulator }

func (a vmAdmitter) ValidateCreate(_ context.Context, vm *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	return a.admit(vm)
}

func (a vmAdmitter) ValidateUpdate(_ context.Context, _, vm *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	return a.admit(vm)
}

func (a vmAdmitter) ValidateDelete(context.Context, *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	return nil, nil
}

func (a vmAdmitter) admit(vm *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	var warnings admission.Warnings
	if vm.Spec.Running != nil {
		warnings = append(warnings, "spec.running is deprecated, please use spec.runStrategy instead.")
	}
	errs := admitVM(vm)
	if len(errs) == 0 {
		return warnings, nil
	}
	a.s.Counters.Add(AdmissionRejections, 1)
	return warnings, apierrors.NewInvalid(kubevirtv1.VirtualMachineGroupVersionKind.GroupKind(), vm.Name, errs)
}

func admitVM(vm *kubevirtv1.VirtualMachine) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	// docs/kubevirt-behaviour.md#exactly-one-of-running-and-runstrategy
	switch {
	case vm.Spec.Running != nil && vm.Spec.RunStrategy != nil:
		errs = append(errs, field.Invalid(spec.Child("running"), *vm.Spec.Running, "Running and RunStrategy are mutually exclusive"))
	case vm.Spec.Running == nil && vm.Spec.RunStrategy == nil:
		errs = append(errs, field.Required(spec.Child("runStrategy"), "RunStrategy must be specified"))
	case vm.Spec.RunStrategy != nil:
		switch *vm.Spec.RunStrategy {
		case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyManual,
			kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce, kubevirtv1.RunStrategyWaitAsReceiver:
		default:
			errs = append(errs, field.Invalid(spec.Child("runStrategy"), *vm.Spec.RunStrategy, "invalid RunStrategy"))
		}
	}
	if vm.Spec.Template == nil {
		return append(errs, field.Required(spec.Child("template"), "missing virtual machine template"))
	}
	vmi := vm.Spec.Template.Spec.DeepCopy()
	applyVMIDefaults(vmi)
	tmpl := spec.Child("template", "spec")
	errs = append(errs, admitDataVolumeTemplates(vm, spec)...)
	errs = append(errs, admitVolumes(vmi, tmpl)...)
	errs = append(errs, admitNetworks(vmi, tmpl)...)
	errs = append(errs, admitResources(vm, vmi, tmpl)...)
	for _, l := range []string{kubevirtv1.CreatedByLabel, kubevirtv1.NodeNameLabel, kubevirtv1.NodeSchedulable} {
		if _, ok := vm.Spec.Template.ObjectMeta.Labels[l]; ok {
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels").Key(l), l, "label is restricted"))
		}
	}
	return errs
}

// applyVMIDefaults adds what KubeVirt adds to a VMI: a disk for every volume
// without one, and the default pod network when no network or interface is
// given. See docs/kubevirt-behaviour.md#volumes-and-disks-pair-by-name and
// docs/kubevirt-behaviour.md#networks-and-interfaces-pair-by-name.
func applyVMIDefaults(vmi *kubevirtv1.VirtualMachineInstanceSpec) {
	disks := map[string]bool{}
	for _, d := range vmi.Domain.Devices.Disks {
		disks[d.Name] = true
	}
	for _, v := range vmi.Volumes {
		if !disks[v.Name] {
			vmi.Domain.Devices.Disks = append(vmi.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
		}
	}
	auto := vmi.Domain.Devices.AutoattachPodInterface
	if len(vmi.Networks) == 0 && len(vmi.Domain.Devices.Interfaces) == 0 && (auto == nil || *auto) {
		vmi.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
		vmi.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultBridgeNetworkInterface()}
	}
}

func admitDataVolumeTemplates(vm *kubevirtv1.VirtualMachine, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	used := map[string]bool{}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.DataVolume != nil {
			used[v.DataVolume.Name] = true
		}
		if v.PersistentVolumeClaim != nil {
			used[v.PersistentVolumeClaim.ClaimName] = true
		}
	}
	for i, t := range vm.Spec.DataVolumeTemplates {
		p := spec.Child("dataVolumeTemplate").Index(i)
		if t.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "'name' field must not be empty for DataVolumeTemplate entry"))
			continue
		}
		if (t.Spec.PVC == nil) == (t.Spec.Storage == nil) {
			errs = append(errs, field.Invalid(p, t.Name, "DataVolume must have either Storage or PVC, but not both"))
		}
		populator := (t.Spec.PVC != nil && t.Spec.PVC.DataSourceRef != nil) || (t.Spec.Storage != nil && t.Spec.Storage.DataSourceRef != nil)
		switch {
		case t.Spec.Source == nil && t.Spec.SourceRef == nil && !populator:
			errs = append(errs, field.Required(p.Child("source"), "DataVolume spec is missing a source"))
		case t.Spec.Source != nil && countPointers(*t.Spec.Source) != 1:
			errs = append(errs, field.Invalid(p.Child("source"), t.Name, "DataVolume source must have exactly one source type"))
		}
		if !used[t.Name] {
			errs = append(errs, field.Invalid(p, t.Name, fmt.Sprintf("DataVolumeTemplate entry %s must be referenced in the VMI template's 'volumes' list", t.Name)))
		}
		if t.Namespace != "" && t.Namespace != vm.Namespace {
			errs = append(errs, field.Invalid(p.Child("namespace"), t.Namespace, "Embedded DataVolume namespace must match the VM namespace"))
		}
	}
	return errs
}

func admitVolumes(vmi *kubevirtv1.VirtualMachineInstanceSpec, tmpl *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, v := range vmi.Volumes {
		p := tmpl.Child("volumes").Index(i)
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		volumes[v.Name] = true
		if countPointers(v.VolumeSource) != 1 {
			errs = append(errs, field.Invalid(p, v.Name, "must have exactly one source type set"))
		}
	}
	disks := map[string]bool{}
	orders := map[uint]bool{}
	for i, d := range vmi.Domain.Devices.Disks {
		p := tmpl.Child("domain", "devices", "disks").Index(i)
		if disks[d.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		disks[d.Name] = true
		if !volumes[d.Name] {
			errs = append(errs, field.Invalid(p.Child("name"), d.Name, fmt.Sprintf("%s '%s' not found.", p.Child("name"), d.Name)))
		}
		if d.BootOrder != nil {
			if *d.BootOrder < 1 || orders[*d.BootOrder] {
				errs = append(errs, field.Invalid(p.Child("bootOrder"), *d.BootOrder, "must be unique and greater than 0"))
			}
			orders[*d.BootOrder] = true
		}
		if d.Disk != nil && d.Disk.Bus == "ide" || d.CDRom != nil && d.CDRom.Bus == "ide" {
			errs = append(errs, field.Invalid(p, d.Name, "IDE bus is not supported"))
		}
	}
	return errs
}

func admitNetworks(vmi *kubevirtv1.VirtualMachineInstanceSpec, tmpl *field.Path) field.ErrorList {
	var errs field.ErrorList
	nets := map[string]kubevirtv1.Network{}
	pods, multusDefaults := 0, 0
	for i, n := range vmi.Networks {
		p := tmpl.Child("networks").Index(i)
		if _, dup := nets[n.Name]; dup {
			errs = append(errs, field.Duplicate(p.Child("name"), n.Name))
		}
		nets[n.Name] = n
		if countPointers(n.NetworkSource) != 1 {
			errs = append(errs, field.Invalid(p, n.Name, "should have exactly one network type"))
		}
		if n.Pod != nil {
			pods++
		}
		if n.Multus != nil && n.Multus.Default {
			multusDefaults++
		}
	}
	if pods > 1 || multusDefaults > 1 || pods > 0 && multusDefaults > 0 {
		errs = append(errs, field.Invalid(tmpl.Child("networks"), len(vmi.Networks),
			"more than one pod network, more than one default Multus network, or both a pod network and a default Multus network"))
	}
	ifaces := map[string]bool{}
	for i, iface := range vmi.Domain.Devices.Interfaces {
		p := tmpl.Child("domain", "devices", "interfaces").Index(i)
		ifaces[iface.Name] = true
		n, ok := nets[iface.Name]
		if !ok {
			errs = append(errs, field.Invalid(p.Child("name"), iface.Name, fmt.Sprintf("%s '%s' not found.", p.Child("name"), iface.Name)))
		}
		bindings := countPointers(iface.InterfaceBindingMethod)
		if iface.Binding != nil {
			bindings++
		}
		switch {
		case iface.DeprecatedSlirp != nil || iface.DeprecatedMacvtap != nil:
			errs = append(errs, field.Invalid(p, iface.Name, "slirp and macvtap bindings are no longer supported"))
		case bindings != 1:
			errs = append(errs, field.Invalid(p, iface.Name, "logical "+iface.Name+" interface must have exactly one binding method"))
		case iface.Masquerade != nil && ok && n.Pod == nil:
			errs = append(errs, field.Invalid(p.Child("masquerade"), iface.Name, "Masquerade interface only implemented with pod network"))
		}
	}
	for i, n := range vmi.Networks {
		if !ifaces[n.Name] {
			p := tmpl.Child("networks").Index(i).Child("name")
			errs = append(errs, field.Invalid(p, n.Name, fmt.Sprintf("%s '%s' not found.", p, n.Name)))
		}
	}
	return errs
}

func admitResources(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstanceSpec, tmpl *field.Path) field.ErrorList {
	d := vmi.Domain
	if vm.Spec.Instancetype != nil {
		var conflicts []string
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := d.Resources.Requests[r]; ok {
				conflicts = append(conflicts, tmpl.Child("domain", "resources", "requests", string(r)).String())
			}
			if _, ok := d.Resources.Limits[r]; ok {
				conflicts = append(conflicts, tmpl.Child("domain", "resources", "limits", string(r)).String())
			}
		}
		if d.CPU != nil && (d.CPU.Sockets != 0 || d.CPU.Cores != 0 || d.CPU.Threads != 0) {
			conflicts = append(conflicts, tmpl.Child("domain", "cpu").String())
		}
		if d.Memory != nil && d.Memory.Guest != nil {
			conflicts = append(conflicts, tmpl.Child("domain", "memory", "guest").String())
		}
		if len(conflicts) > 0 {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "instancetype"), vm.Spec.Instancetype.Name,
				fmt.Sprintf("VM field(s) %s conflicts with selected instance type", strings.Join(conflicts, ", ")))}
		}
		return nil
	}
	return nil
}

// countPointers counts the set pointer fields of a one-of struct.
func countPointers(v any) int {
	rv := reflect.ValueOf(v)
	n := 0
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

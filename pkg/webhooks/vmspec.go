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

package webhooks

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The checks below mirror the admission rules of KubeVirt's virt-api (see
// docs/kubevirt-behaviour.md#virtualmachine-admission), so that a VM template KubeVirt would
// refuse is refused when the KubevirtMachine or its template is applied, with
// a field path the user can act on, instead of failing later on the infra
// cluster.

var validRunStrategies = sets.New(
	kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyManual,
	kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce,
)

var validEvictionStrategies = sets.New(
	kubevirtv1.EvictionStrategyNone, kubevirtv1.EvictionStrategyLiveMigrate,
	kubevirtv1.EvictionStrategyLiveMigrateIfPossible, kubevirtv1.EvictionStrategyExternal,
)

// reservedTemplateLabels are set by KubeVirt itself and rejected on templates.
var reservedTemplateLabels = []string{
	kubevirtv1.CreatedByLabel, kubevirtv1.NodeNameLabel, kubevirtv1.NodeSchedulable,
}

// validateVirtualMachineSpec checks a VirtualMachineSpec the way virt-api
// would. vmNamespace is the namespace the VM will live in.
func validateVirtualMachineSpec(spec *kubevirtv1.VirtualMachineSpec, vmNamespace string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList

	switch {
	case spec.Running != nil && spec.RunStrategy != nil:
		errs = append(errs, field.Forbidden(fld.Child("running"),
			"running and runStrategy are mutually exclusive: set only runStrategy"))
	case spec.Running == nil && spec.RunStrategy == nil:
		errs = append(errs, field.Required(fld.Child("runStrategy"),
			fmt.Sprintf("KubeVirt requires a run strategy; allowed: %s", joined(validRunStrategies))))
	case spec.RunStrategy != nil && !validRunStrategies.Has(*spec.RunStrategy):
		errs = append(errs, field.NotSupported(fld.Child("runStrategy"), *spec.RunStrategy, sorted(validRunStrategies)))
	}

	if spec.Template == nil {
		return append(errs, field.Required(fld.Child("template"), "the VirtualMachineInstance template is required"))
	}
	tmplPath := fld.Child("template")
	errs = append(errs, validateTemplateLabels(spec.Template.ObjectMeta.Labels, tmplPath.Child("metadata", "labels"))...)
	vmi := &spec.Template.Spec
	vmiPath := tmplPath.Child("spec")

	volumeNames, volErrs := validateVolumes(vmi.Volumes, vmiPath.Child("volumes"))
	errs = append(errs, volErrs...)
	errs = append(errs, validateDisks(vmi.Domain.Devices.Disks, volumeNames, vmiPath.Child("domain", "devices", "disks"))...)
	errs = append(errs, validateDataVolumeTemplates(spec.DataVolumeTemplates, vmi.Volumes, vmNamespace, fld.Child("dataVolumeTemplates"))...)
	errs = append(errs, validateNetworks(vmi, vmiPath)...)
	errs = append(errs, validateResources(spec, vmiPath)...)
	errs = append(errs, validateHotplugMaxima(vmi, vmiPath)...)

	if vmi.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(vmi.Hostname) {
			errs = append(errs, field.Invalid(vmiPath.Child("hostname"), vmi.Hostname, msg))
		}
	}
	if vmi.EvictionStrategy != nil && !validEvictionStrategies.Has(*vmi.EvictionStrategy) {
		errs = append(errs, field.NotSupported(vmiPath.Child("evictionStrategy"), *vmi.EvictionStrategy, sorted(validEvictionStrategies)))
	}
	hasPodNetwork := podNetworkPresent(vmi)
	errs = append(errs, validateProbe(vmi.ReadinessProbe, hasPodNetwork, vmiPath.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(vmi.LivenessProbe, hasPodNetwork, vmiPath.Child("livenessProbe"))...)
	return errs
}

func validateTemplateLabels(labels map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range reservedTemplateLabels {
		if _, ok := labels[key]; ok {
			errs = append(errs, field.Forbidden(fld.Key(key), "this label is reserved for KubeVirt"))
		}
	}
	return errs
}

// validateVolumes checks names are unique and each volume has one source; it
// returns the set of volume names.
func validateVolumes(volumes []kubevirtv1.Volume, fld *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		p := fld.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "every volume needs a name"))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		names.Insert(v.Name)
		if n := countSet(v.VolumeSource); n != 1 {
			errs = append(errs, field.Invalid(p, v.Name,
				fmt.Sprintf("a volume needs exactly one source (containerDisk, dataVolume, persistentVolumeClaim, cloudInitNoCloud, ...), found %d", n)))
		}
	}
	return names, errs
}

func validateDisks(disks []kubevirtv1.Disk, volumeNames sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	bootOrders := map[uint]string{}
	for i, d := range disks {
		p := fld.Index(i)
		for _, msg := range validation.IsDNS1123Label(d.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), d.Name, msg))
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		if !volumeNames.Has(d.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), d.Name, "every disk needs a volume of the same name in spec.template.spec.volumes"))
		}
		if d.BootOrder != nil {
			switch other, dup := bootOrders[*d.BootOrder]; {
			case *d.BootOrder < 1:
				errs = append(errs, field.Invalid(p.Child("bootOrder"), *d.BootOrder, "must be greater than 0"))
			case dup:
				errs = append(errs, field.Invalid(p.Child("bootOrder"), *d.BootOrder, fmt.Sprintf("already used by disk %q; boot orders must be unique", other)))
			}
			bootOrders[*d.BootOrder] = d.Name
		}
		if diskBus(d) == "ide" {
			errs = append(errs, field.NotSupported(p.Child("disk", "bus"), "ide", []string{"virtio", "sata", "scsi", "usb"}))
		}
	}
	return errs
}

func diskBus(d kubevirtv1.Disk) kubevirtv1.DiskBus {
	switch {
	case d.Disk != nil:
		return d.Disk.Bus
	case d.LUN != nil:
		return d.LUN.Bus
	case d.CDRom != nil:
		return d.CDRom.Bus
	}
	return ""
}

func validateDataVolumeTemplates(templates []kubevirtv1.DataVolumeTemplateSpec, volumes []kubevirtv1.Volume, vmNamespace string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	referenced := sets.New[string]()
	for _, v := range volumes {
		switch {
		case v.DataVolume != nil:
			referenced.Insert(v.DataVolume.Name)
		case v.PersistentVolumeClaim != nil:
			referenced.Insert(v.PersistentVolumeClaim.ClaimName)
		}
	}
	names := sets.New[string]()
	for i, t := range templates {
		p := fld.Index(i)
		switch {
		case t.Name == "":
			errs = append(errs, field.Required(p.Child("metadata", "name"), "every DataVolume template needs a name"))
		case names.Has(t.Name):
			errs = append(errs, field.Duplicate(p.Child("metadata", "name"), t.Name))
		case !referenced.Has(t.Name):
			errs = append(errs, field.Invalid(p.Child("metadata", "name"), t.Name,
				"a DataVolume template must be used by a dataVolume or persistentVolumeClaim volume of the same name"))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(t.Name) {
				errs = append(errs, field.Invalid(p.Child("metadata", "name"), t.Name, msg))
			}
		}
		names.Insert(t.Name)
		if t.Namespace != "" && t.Namespace != vmNamespace {
			errs = append(errs, field.Invalid(p.Child("metadata", "namespace"), t.Namespace,
				"a DataVolume template must be in the namespace of its VirtualMachine; leave it empty"))
		}
		if (t.Spec.PVC == nil) == (t.Spec.Storage == nil) {
			errs = append(errs, field.Invalid(p.Child("spec"), "", "exactly one of pvc and storage is required"))
		}
		errs = append(errs, validateDataVolumeSource(t, p.Child("spec"))...)
	}
	return errs
}

func validateDataVolumeSource(t kubevirtv1.DataVolumeTemplateSpec, fld *field.Path) field.ErrorList {
	populator := (t.Spec.PVC != nil && t.Spec.PVC.DataSourceRef != nil) ||
		(t.Spec.Storage != nil && t.Spec.Storage.DataSourceRef != nil)
	switch {
	case t.Spec.Source != nil && t.Spec.SourceRef != nil:
		return field.ErrorList{field.Invalid(fld, "", "source and sourceRef are mutually exclusive")}
	case t.Spec.Source != nil:
		if n := countSet(*t.Spec.Source); n != 1 {
			return field.ErrorList{field.Invalid(fld.Child("source"), n,
				"exactly one source (http, registry, pvc, snapshot, blank, ...) is required")}
		}
	case t.Spec.SourceRef != nil:
		if t.Spec.SourceRef.Kind != "DataSource" {
			return field.ErrorList{field.NotSupported(fld.Child("sourceRef", "kind"), t.Spec.SourceRef.Kind, []string{"DataSource"})}
		}
		if t.Spec.SourceRef.Name == "" {
			return field.ErrorList{field.Required(fld.Child("sourceRef", "name"), "the DataSource name is required")}
		}
	case !populator:
		return field.ErrorList{field.Required(fld.Child("source"), "one of source, sourceRef or a volume populator is required")}
	}
	return nil
}

// validateResources enforces that memory is given, and that an instance type
// is not contradicted by the template.
func validateResources(spec *kubevirtv1.VirtualMachineSpec, vmiPath *field.Path) field.ErrorList {
	domain := spec.Template.Spec.Domain
	domainPath := vmiPath.Child("domain")
	res := domain.Resources
	if spec.Instancetype != nil {
		var errs field.ErrorList
		const msg = "conflicts with the selected instance type; set CPU and memory in the instance type"
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := res.Requests[r]; ok {
				errs = append(errs, field.Forbidden(domainPath.Child("resources", "requests").Key(string(r)), msg))
			}
			if _, ok := res.Limits[r]; ok {
				errs = append(errs, field.Forbidden(domainPath.Child("resources", "limits").Key(string(r)), msg))
			}
		}
		if cpu := domain.CPU; cpu != nil {
			for name, v := range map[string]uint32{"sockets": cpu.Sockets, "cores": cpu.Cores, "threads": cpu.Threads} {
				if v != 0 {
					errs = append(errs, field.Forbidden(domainPath.Child("cpu", name), msg))
				}
			}
		}
		if domain.Memory != nil && domain.Memory.Guest != nil {
			errs = append(errs, field.Forbidden(domainPath.Child("memory", "guest"), msg))
		}
		sortErrors(errs)
		return errs
	}
	_, hasRequest := res.Requests[corev1.ResourceMemory]
	_, hasLimit := res.Limits[corev1.ResourceMemory]
	hasGuest := domain.Memory != nil && (domain.Memory.Guest != nil || domain.Memory.Hugepages != nil)
	if !hasRequest && !hasLimit && !hasGuest {
		return field.ErrorList{field.Required(domainPath.Child("memory", "guest"),
			"the VM needs memory: set domain.memory.guest or domain.resources.requests.memory, or select an instance type")}
	}
	return nil
}

func podNetworkPresent(vmi *kubevirtv1.VirtualMachineInstanceSpec) bool {
	if len(vmi.Networks) == 0 && len(vmi.Domain.Devices.Interfaces) == 0 {
		// KubeVirt adds a default pod network unless told not to.
		return vmi.Domain.Devices.AutoattachPodInterface == nil || *vmi.Domain.Devices.AutoattachPodInterface
	}
	for _, n := range vmi.Networks {
		if n.Pod != nil {
			return true
		}
	}
	return false
}

func validateProbe(probe *kubevirtv1.Probe, hasPodNetwork bool, fld *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	if n := countSet(probe.Handler); n != 1 {
		return field.ErrorList{field.Invalid(fld, n, "exactly one of httpGet, tcpSocket, exec and guestAgentPing is required")}
	}
	if (probe.HTTPGet != nil || probe.TCPSocket != nil) && !hasPodNetwork {
		return field.ErrorList{field.Invalid(fld, "", "httpGet and tcpSocket probes need a pod network; use exec or guestAgentPing")}
	}
	return nil
}

// countSet counts the non-nil pointer fields of a struct, for one-of checks.
func countSet(v any) int {
	rv := reflect.ValueOf(v)
	n := 0
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func sorted[T ~string](s sets.Set[T]) []string {
	out := make([]string, 0, s.Len())
	for v := range s {
		out = append(out, string(v))
	}
	sort.Strings(out)
	return out
}

func joined[T ~string](s sets.Set[T]) string { return strings.Join(sorted(s), ", ") }

func sortErrors(errs field.ErrorList) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
}

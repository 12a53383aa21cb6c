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

// Package vmbuilder turns a KubevirtMachine and the facts around it into the
// KubeVirt VirtualMachine to create. It is a pure function: no client, no
// clock, so every rule is covered by table tests.
package vmbuilder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// UserDataVolume is the name of the volume and disk carrying bootstrap data.
const UserDataVolume = "capkv-userdata"

// DefaultFailureDomainLabel is the node label a failure domain name is
// matched against.
const DefaultFailureDomainLabel = corev1.LabelTopologyZone

// Input is everything the VM depends on.
type Input struct {
	// Name and Namespace of the VM on the infra cluster. Name is the
	// KubevirtMachine's name.
	Name, Namespace string
	// Spec is the KubevirtMachine's spec.
	Spec infrav1.KubevirtMachineSpec
	// KubevirtMachineNamespace is the namespace of the KubevirtMachine on the
	// management cluster.
	KubevirtMachineNamespace string
	// ClusterName, MachineName, MachineDeployment and MachinePool (each but
	// the first may be empty) name the CAPI objects the VM belongs to.
	ClusterName, MachineName, MachineDeployment, MachinePool string
	// ControlPlane is true for control-plane machines.
	ControlPlane bool
	// FailureDomain is the Machine's failure domain; empty means anywhere.
	FailureDomain string
	// FailureDomainSelector, when set, are the node labels the failure
	// domain requires, instead of DefaultFailureDomainLabel=FailureDomain.
	FailureDomainSelector map[string]string
	// UserDataSecret is the Secret holding user data (and network data).
	UserDataSecret string
	// Format is the bootstrap data format: cloud-config or ignition.
	Format string
	// HasNetworkData is true when the user data Secret carries network data.
	HasNetworkData bool
	// GoldenVolume is the golden volume the root disk is cloned from, when
	// the spec's root disk needs one.
	GoldenVolume *types.NamespacedName
	// ClusterNetworks are the Multus networks of every machine of the
	// cluster; the machine's own networks of the same name win.
	ClusterNetworks []infrav1.MultusNetwork
	// DNSPolicy and DNSConfig are the cluster's DNS defaults, used when the
	// VM template sets neither.
	DNSPolicy corev1.DNSPolicy
	DNSConfig *corev1.PodDNSConfig
	// Owner, when set, becomes the VM's controller owner reference; only on
	// the management cluster itself, where the reference can resolve.
	Owner *metav1.OwnerReference
	// NUMAPassthrough is true when the infra cluster's KubeVirt enables the
	// NUMA feature gate, so the performance preset can map the guest's NUMA
	// topology to the host's.
	NUMAPassthrough bool
	// InterfaceMAC, when set, gives each interface without a MAC address
	// one, by network name: the guest's network configuration matches
	// interfaces by MAC (docs/ipam.md).
	InterfaceMAC func(network string) string
}

// Build returns the VirtualMachine for in. The user's virtualMachineTemplate
// is kept as written; the builder only prefixes DataVolume template names
// with the VM name (see DataVolumeName) and adds: identifying labels, a run
// strategy when none is set, a hostname when none is set, the failure-domain
// node affinity, the placement presets and default topology spread
// (placement.go), the sizing preset (preset.go), the cluster's and the machine's Multus networks, the
// cluster's DNS settings when the template has none, the user data volume,
// and for the guest-agent check a readiness probe. Only a sizing preset
// touches CPU or memory, and the webhook refuses one with an instance type.
func Build(in Input) (*kubevirtv1.VirtualMachine, error) {
	tmplSpec := in.Spec.VirtualMachineTemplate.Spec.DeepCopy()
	if tmplSpec.Template == nil {
		return nil, errors.New("virtualMachineTemplate.spec.template is required: it is the VM's instance spec")
	}
	labels := IdentityLabels(in)
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   in.Namespace,
			Labels:      merged(in.Spec.VirtualMachineTemplate.ObjectMeta.Labels, labels),
			Annotations: maps.Clone(in.Spec.VirtualMachineTemplate.ObjectMeta.Annotations),
		},
		Spec: *tmplSpec,
	}
	owner := OwnerOf(in.KubevirtMachineNamespace, in.Name)
	vm.Annotations = merged(vm.Annotations, map[string]string{infrav1.OwnerAnnotation: owner})
	if in.Owner != nil {
		vm.OwnerReferences = []metav1.OwnerReference{*in.Owner}
	}
	// KubeVirt requires exactly one of running and runStrategy (docs/kubevirt-behaviour.md#exactly-one-of-running-and-runstrategy).
	if vm.Spec.Running == nil && vm.Spec.RunStrategy == nil {
		always := kubevirtv1.RunStrategyAlways
		vm.Spec.RunStrategy = &always
	}
	if err := addDisks(vm, in); err != nil {
		return nil, err
	}
	prefixDataVolumes(vm)
	tmpl := vm.Spec.Template
	tmpl.ObjectMeta.Labels = merged(tmpl.ObjectMeta.Labels, labels)
	tmpl.ObjectMeta.Annotations = merged(tmpl.ObjectMeta.Annotations, map[string]string{infrav1.OwnerAnnotation: owner})
	for i := range vm.Spec.DataVolumeTemplates {
		// KubeVirt copies these to the DataVolume, so its events map back
		// to the machine even after the VM is gone.
		t := &vm.Spec.DataVolumeTemplates[i]
		t.Annotations = merged(t.Annotations, map[string]string{infrav1.OwnerAnnotation: owner})
	}
	if tmpl.Spec.Hostname == "" {
		tmpl.Spec.Hostname = Hostname(in.Name)
	}
	if in.FailureDomain != "" {
		sel := in.FailureDomainSelector
		if len(sel) == 0 {
			sel = map[string]string{DefaultFailureDomainLabel: in.FailureDomain}
		}
		for _, k := range slices.Sorted(maps.Keys(sel)) {
			requireNode(&tmpl.Spec, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{sel[k]}})
		}
	}
	addPlacement(&tmpl.Spec, in)
	if err := addPreset(&tmpl.Spec, in); err != nil {
		return nil, err
	}
	if err := addNetworks(&tmpl.Spec, in); err != nil {
		return nil, err
	}
	if in.InterfaceMAC != nil {
		for k := range tmpl.Spec.Domain.Devices.Interfaces {
			if iface := &tmpl.Spec.Domain.Devices.Interfaces[k]; iface.MacAddress == "" {
				iface.MacAddress = in.InterfaceMAC(iface.Name)
			}
		}
	}
	if tmpl.Spec.DNSPolicy == "" && tmpl.Spec.DNSConfig == nil {
		tmpl.Spec.DNSPolicy = in.DNSPolicy
		tmpl.Spec.DNSConfig = in.DNSConfig.DeepCopy()
	}
	addUserData(&tmpl.Spec, in)
	if in.Spec.BootstrapCheckSpec.CheckStrategy == infrav1.CheckStrategyGuestAgent {
		tmpl.Spec.ReadinessProbe = SentinelProbe()
	}
	return vm, nil
}

// addDisks adds the root disk, first so that it boots, and the data disks,
// each with its DataVolume template.
func addDisks(vm *kubevirtv1.VirtualMachine, in Input) error {
	spec := &vm.Spec.Template.Spec
	if rd := in.Spec.RootDisk; rd != nil {
		t, err := goldenplan.RootDiskTemplate(rd, in.Namespace, in.GoldenVolume)
		if err != nil {
			return err
		}
		vm.Spec.DataVolumeTemplates = append([]kubevirtv1.DataVolumeTemplateSpec{t}, vm.Spec.DataVolumeTemplates...)
		spec.Volumes = append([]kubevirtv1.Volume{{Name: goldenplan.RootDiskName, VolumeSource: kubevirtv1.VolumeSource{
			DataVolume: &kubevirtv1.DataVolumeSource{Name: goldenplan.RootDiskName}}}}, spec.Volumes...)
		spec.Domain.Devices.Disks = append([]kubevirtv1.Disk{{Name: goldenplan.RootDiskName,
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}, spec.Domain.Devices.Disks...)
	}
	for i := range in.Spec.DataDisks {
		d := &in.Spec.DataDisks[i]
		vm.Spec.DataVolumeTemplates = append(vm.Spec.DataVolumeTemplates, goldenplan.DataDiskTemplate(d))
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: d.Name, VolumeSource: kubevirtv1.VolumeSource{
			DataVolume: &kubevirtv1.DataVolumeSource{Name: d.Name, Hotpluggable: d.Hotpluggable}}})
		bus := kubevirtv1.DiskBusVirtio
		if d.Hotpluggable {
			// KubeVirt hotplugs disks on the SCSI bus only.
			bus = kubevirtv1.DiskBusSCSI
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: d.Name,
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: bus}}})
	}
	return nil
}

// DataVolumeName is the name of the DataVolume made from the VM's template
// named template: prefixed with the VM name, since every machine of a
// MachineDeployment shares the template and DataVolume names must be unique
// in a namespace. CDI takes only DNS-1123 labels (63 characters), and
// Cluster API names a topology cluster's workers <cluster>-<pool>-<5>-<5>-<5>,
// so a VM name that leaves no room for the template's keeps its first part
// and a hash of the whole instead: unique, and the same on every reconcile.
// A name that fits is kept as it is, so existing DataVolumes keep theirs.
func DataVolumeName(vmName, template string) string {
	name := vmName + "-" + template
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(vmName))
	hash := hex.EncodeToString(sum[:4])
	keep := validation.DNS1123LabelMaxLength - len(hash) - len(template) - 2
	if keep < 1 {
		// The template's name alone is too long; admission refuses it.
		return name
	}
	return strings.TrimRight(vmName[:keep], "-.") + "-" + hash + "-" + template
}

// prefixDataVolumes renames the DataVolume templates and the volumes that
// use them.
func prefixDataVolumes(vm *kubevirtv1.VirtualMachine) {
	renamed := map[string]string{}
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		renamed[t.Name] = DataVolumeName(vm.Name, t.Name)
		t.Name = renamed[t.Name]
	}
	for i := range vm.Spec.Template.Spec.Volumes {
		v := &vm.Spec.Template.Spec.Volumes[i]
		switch {
		case v.DataVolume != nil && renamed[v.DataVolume.Name] != "":
			v.DataVolume.Name = renamed[v.DataVolume.Name]
		case v.PersistentVolumeClaim != nil && renamed[v.PersistentVolumeClaim.ClaimName] != "":
			v.PersistentVolumeClaim.ClaimName = renamed[v.PersistentVolumeClaim.ClaimName]
		}
	}
}

// OwnerOf is the value of the owner annotation for a KubevirtMachine.
func OwnerOf(namespace, name string) string { return namespace + "/" + name }

// ProviderKey reports whether the builder sets the VM label or annotation
// key itself, over what the template says: the identity labels and the
// owner annotations.
func ProviderKey(key string) bool {
	switch key {
	case infrav1.ClusterNameLabel, infrav1.RoleLabel, infrav1.MachineLabel, infrav1.KubevirtMachineLabel,
		infrav1.KubevirtMachineNamespaceLabel, infrav1.VMNameLabel, infrav1.MachineDeploymentLabel,
		infrav1.MachinePoolLabel, infrav1.OwnerAnnotation, infrav1.PoolOwnerAnnotation:
		return true
	}
	return false
}

// IdentityLabels are the labels that tie a VM of in and its pods to the
// Cluster API objects (ProviderKey lists their keys): what Build sets, and
// what an adopted VM is given.
func IdentityLabels(in Input) map[string]string {
	role := infrav1.RoleWorker
	if in.ControlPlane {
		role = infrav1.RoleControlPlane
	}
	l := map[string]string{
		infrav1.ClusterNameLabel:              in.ClusterName,
		infrav1.RoleLabel:                     role,
		infrav1.MachineLabel:                  in.MachineName,
		infrav1.KubevirtMachineLabel:          in.Name,
		infrav1.KubevirtMachineNamespaceLabel: in.KubevirtMachineNamespace,
		infrav1.VMNameLabel:                   in.Name,
	}
	if in.MachineDeployment != "" {
		l[infrav1.MachineDeploymentLabel] = in.MachineDeployment
	}
	if in.MachinePool != "" {
		l[infrav1.MachinePoolLabel] = in.MachinePool
	}
	for k, v := range l {
		// Label values are limited to 63 characters; names can be longer.
		if len(validation.IsValidLabelValue(v)) > 0 {
			delete(l, k)
		}
	}
	return l
}

// ClusterSelector is the labels every VM instance (and so every
// virt-launcher pod) of the tenant cluster clusterName carries, whose
// KubevirtMachines live in namespace ns. Services and NetworkPolicies select
// a cluster's VMs by them.
func ClusterSelector(clusterName, ns string) map[string]string {
	return map[string]string{infrav1.ClusterNameLabel: clusterName, infrav1.KubevirtMachineNamespaceLabel: ns}
}

// merged returns base with extra on top; base is not modified.
func merged(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}

// Hostname is the guest hostname for a VM name: a DNS-1123 label, as
// KubeVirt requires of spec.hostname (docs/kubevirt-behaviour.md#hostnames-are-dns-labels-derived-from-the-name). It is the node name, so it
// is the name up to the first dot, cut to 63 characters.
func Hostname(name string) string {
	host, _, _ := strings.Cut(name, ".")
	if len(host) > validation.DNS1123LabelMaxLength {
		host = host[:validation.DNS1123LabelMaxLength]
	}
	return strings.TrimRight(host, "-")
}

// addUserData attaches the user data Secret. The volume goes first because
// virt-launcher reads the first cloud-init volume in list order (docs/kubevirt-behaviour.md#volumes-and-disks-pair-by-name);
// the disk goes last so the user's boot disk stays first.
func addUserData(spec *kubevirtv1.VirtualMachineInstanceSpec, in Input) {
	secret := &corev1.LocalObjectReference{Name: in.UserDataSecret}
	var network *corev1.LocalObjectReference
	if in.HasNetworkData {
		network = secret
	}
	vol := kubevirtv1.Volume{Name: UserDataVolume}
	if in.Format == "ignition" || in.Spec.UserData.CloudInitDataSource == infrav1.CloudInitConfigDrive {
		// Ignition on KubeVirt is read from a config drive (docs/kubevirt-behaviour.md#ignition-through-a-config-drive), which
		// needs no feature gate, unlike the ignitiondata annotation (docs/kubevirt-behaviour.md#the-ignition-annotation).
		vol.CloudInitConfigDrive = &kubevirtv1.CloudInitConfigDriveSource{UserDataSecretRef: secret, NetworkDataSecretRef: network}
	} else {
		vol.CloudInitNoCloud = &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: secret, NetworkDataSecretRef: network}
	}
	spec.Volumes = append([]kubevirtv1.Volume{vol}, spec.Volumes...)
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{
		Name:       UserDataVolume,
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
	})
}

// UseNetworkData points the user data volume of a built VM at the network
// data of the user data Secret too, for network config decided after the
// build (the guest network, which needs the VM's interfaces).
func UseNetworkData(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.Name != UserDataVolume {
			continue
		}
		switch {
		case v.CloudInitNoCloud != nil && v.CloudInitNoCloud.NetworkDataSecretRef == nil:
			v.CloudInitNoCloud.NetworkDataSecretRef = v.CloudInitNoCloud.UserDataSecretRef.DeepCopy()
		case v.CloudInitConfigDrive != nil && v.CloudInitConfigDrive.NetworkDataSecretRef == nil:
			v.CloudInitConfigDrive.NetworkDataSecretRef = v.CloudInitConfigDrive.UserDataSecretRef.DeepCopy()
		}
	}
}

// SentinelProbe is the readiness probe of the guest-agent bootstrap check:
// KubeVirt runs it through the guest agent, so the VMI turns Ready only once
// the bootstrap sentinel file exists, with no network path to the guest.
func SentinelProbe() *kubevirtv1.Probe {
	return &kubevirtv1.Probe{
		Handler: kubevirtv1.Handler{Exec: &corev1.ExecAction{
			Command: []string{"test", "-f", infrav1.BootstrapSentinelFile},
		}},
		InitialDelaySeconds: 10,
		PeriodSeconds:       10,
		TimeoutSeconds:      5,
		FailureThreshold:    3,
	}
}

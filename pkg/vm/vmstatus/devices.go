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

package vmstatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DeviceShortage is a device plugin resource the scheduler found no infra
// node with enough of free, and how many the VM asks for.
type DeviceShortage struct {
	Resource corev1.ResourceName
	Wanted   int64
}

// ShortDevices are the GPUs and host devices of a VM instance that keep
// it from being scheduled: those the scheduler's message on its
// PodScheduled condition calls insufficient. virt-controller asks for one
// of a device's resource per GPU or host device naming it
// (docs/kubevirt-behaviour.md#gpus-and-host-devices).
func ShortDevices(vmi *kubevirtv1.VirtualMachineInstance) []DeviceShortage {
	c := Condition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
	if c == nil || c.Status != corev1.ConditionFalse {
		return nil
	}
	var short []DeviceShortage
	for _, name := range deviceNames(&vmi.Spec) {
		i := slices.IndexFunc(short, func(d DeviceShortage) bool { return d.Resource == name })
		switch {
		case i >= 0:
			short[i].Wanted++
		case insufficient(c.Message, name):
			short = append(short, DeviceShortage{Resource: name, Wanted: 1})
		}
	}
	return short
}

// insufficient says whether the scheduler's message names the resource
// as insufficient on some node ("N Insufficient <resource>", a whole word:
// one resource name may prefix another).
func insufficient(message string, name corev1.ResourceName) bool {
	for rest := message; ; {
		i := strings.Index(rest, "Insufficient "+string(name))
		if i < 0 {
			return false
		}
		rest = rest[i+len("Insufficient ")+len(name):]
		if rest == "" || strings.ContainsRune(",. ", rune(rest[0])) {
			return true
		}
	}
}

func deviceNames(spec *kubevirtv1.VirtualMachineInstanceSpec) []corev1.ResourceName {
	var names []corev1.ResourceName
	for _, g := range spec.Domain.Devices.GPUs {
		if g.DeviceName != "" {
			names = append(names, corev1.ResourceName(g.DeviceName))
		}
	}
	for _, h := range spec.Domain.Devices.HostDevices {
		if h.DeviceName != "" {
			names = append(names, corev1.ResourceName(h.DeviceName))
		}
	}
	return names
}

// DeviceCount is how many of a device resource the infra nodes have and
// how many of those the VM instances placed there hold.
type DeviceCount struct {
	Nodes, Total, Held int64
}

// Free is how many devices no VM instance holds. Pods other than launcher
// pods may hold some too; the scheduler's message is the last word.
func (d DeviceCount) Free() int64 { return max(d.Total-d.Held, 0) }

// CountDevices counts a device resource over the infra nodes that
// advertise it, and what the VM instances placed on them and not finished
// hold of it.
func CountDevices(nodes []corev1.Node, vmis []kubevirtv1.VirtualMachineInstance, name corev1.ResourceName) DeviceCount {
	var count DeviceCount
	has := map[string]bool{}
	for _, n := range nodes {
		if q, ok := n.Status.Allocatable[name]; ok && !q.IsZero() {
			count.Nodes++
			count.Total += q.Value()
			has[n.Name] = true
		}
	}
	for i := range vmis {
		vmi := &vmis[i]
		if !has[vmi.Status.NodeName] || vmi.IsFinal() {
			continue
		}
		for _, d := range deviceNames(&vmi.Spec) {
			if d == name {
				count.Held++
			}
		}
	}
	return count
}

// DevicesMessage says what keeps the VM instance from being scheduled
// for want of devices: for each short device, how many it asks for and,
// where counts has it, how many are free; then the scheduler's own words.
// Empty when it is short of none.
func DevicesMessage(vmi *kubevirtv1.VirtualMachineInstance, counts map[corev1.ResourceName]DeviceCount) string {
	short := ShortDevices(vmi)
	if len(short) == 0 {
		return ""
	}
	parts := make([]string, 0, len(short))
	for _, d := range short {
		part := fmt.Sprintf("%d %s", d.Wanted, d.Resource)
		if c, ok := counts[d.Resource]; ok {
			part += fmt.Sprintf(" (%d of %d free on %d infra nodes)", c.Free(), c.Total, c.Nodes)
		}
		parts = append(parts, part)
	}
	return "no infra node has free the devices the VM asks for: " + strings.Join(parts, ", ") +
		"; the scheduler: " + conditionMessage(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
}

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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// attachmentPodApp labels the pods virt-controller creates to hold a VM's
// hot-plugged volumes on its node (kubevirt pkg/virt-controller/services
// template.go, RenderHotplugAttachmentPodTemplate).
const attachmentPodApp = "hotplug-disk"

// Reasons virt-handler gives a hot-plugged volume's phases (kubevirt
// pkg/virt-handler/controller.go).
const (
	volumeMountedToPodReason     = "VolumeMountedToPod"
	volumeUnMountedFromPodReason = "VolumeUnMountedFromPod"
	volumeReadyReason            = "VolumeReady"
)

// isAttachmentPod says whether a pod is a hot-plug attachment pod.
func isAttachmentPod(pod *corev1.Pod) bool {
	return pod.Labels[kubevirtv1.AppLabel] == attachmentPodApp
}

// syncHotplugVolumes plays virt-handler and virt-launcher on a running
// VMI's hot-plugged volumes (kubevirt pkg/virt-handler/vm.go,
// updateHotplugVolumeStatus), one step per call, as each of their syncs
// takes one: a volume in the spec whose attachment pod virt-controller
// found ready is mounted into the launcher pod, then attached to the
// domain, where it gets a target and turns Ready; a volume gone from the
// spec is detached and unmounted, and virt-controller may then delete its
// attachment pod. It says whether it changed the status.
func syncHotplugVolumes(vmi *kubevirtv1.VirtualMachineInstance) bool {
	inSpec := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inSpec[v.Name] = true
	}
	changed := false
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		if vs.HotplugVolume == nil {
			continue
		}
		switch {
		case inSpec[vs.Name] && vs.Phase == kubevirtv1.HotplugVolumeMounted:
			vs.Target = freeTarget(vmi)
			vs.Phase, vs.Reason = kubevirtv1.VolumeReady, volumeReadyReason
			vs.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", vs.Name)
		case inSpec[vs.Name] && vs.HotplugVolume.AttachPodUID != "" && vs.Target == "" &&
			(vs.Phase == kubevirtv1.VolumeBound || vs.Phase == kubevirtv1.VolumePending || vs.Phase == kubevirtv1.HotplugVolumeAttachedToNode):
			// virt-controller sets the pod's UID once its container is
			// ready: the volume is on the node, for virt-handler to
			// mount.
			vs.Phase, vs.Reason = kubevirtv1.HotplugVolumeMounted, volumeMountedToPodReason
			vs.Message = fmt.Sprintf("Volume %s has been mounted in virt-launcher pod", vs.Name)
		case !inSpec[vs.Name] && (vs.Phase == kubevirtv1.VolumeReady || vs.Phase == kubevirtv1.HotplugVolumeMounted ||
			vs.Phase == kubevirtv1.HotplugVolumeAttachedToNode):
			vs.Target = ""
			vs.Phase, vs.Reason = kubevirtv1.HotplugVolumeUnMounted, volumeUnMountedFromPodReason
			vs.Message = fmt.Sprintf("Volume %s has been unmounted from virt-launcher pod", vs.Name)
		default:
			continue
		}
		changed = true
	}
	return changed
}

// freeTarget is the first SCSI disk name no volume of the VMI holds: the
// domain's next hot-plugged disk.
func freeTarget(vmi *kubevirtv1.VirtualMachineInstance) string {
	taken := map[string]bool{}
	for _, vs := range vmi.Status.VolumeStatus {
		taken[vs.Target] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		if name := "sd" + string(c); !taken[name] {
			return name
		}
	}
	return ""
}

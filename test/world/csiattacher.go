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

package world

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// hotplugTimeout is how long ControllerPublish and ControllerUnpublish
// wait for the VM instance to report the volume ready or gone
// (EnsureVolumeAvailable, EnsureVolumeRemoved: 2 minutes, polled every
// second).
const hotplugTimeout = 2 * time.Minute

// hotplugBackoff is how the driver retries addvolume and removevolume: it
// logs each failure, and reports only that it timed out.
var hotplugBackoff = wait.Backoff{Duration: time.Second, Steps: 5, Factor: 2, Cap: 30 * time.Second}

// pendingAttachments are the driver's VolumeAttachments the external
// attacher has work on: one not attached, or one being deleted that it
// attached.
func pendingAttachments(attachments []storagev1.VolumeAttachment) []*storagev1.VolumeAttachment {
	var out []*storagev1.VolumeAttachment
	for i := range attachments {
		va := &attachments[i]
		if va.Spec.Attacher != csiDriverName {
			continue
		}
		deleting := !va.DeletionTimestamp.IsZero()
		if deleting && controllerutil.ContainsFinalizer(va, csiAttacherFinalizer) || !deleting && !va.Status.Attached {
			out = append(out, va)
		}
	}
	return out
}

// startAttacher has the external attacher call ControllerPublish (or
// ControllerUnpublish, for a VolumeAttachment being deleted) for one
// VolumeAttachment, unless a call for it is under way: each blocks until
// the VM instance shows the result, as the driver's do, and then records
// it on the VolumeAttachment.
func (cc *cloudController) startAttacher(ctx context.Context, c inmemoryruntime.Client, cluster string, access csiAccess,
	va *storagev1.VolumeAttachment, volumes []corev1.PersistentVolume, nodes []corev1.Node) {
	key := cluster + "/" + va.Name
	cc.mu.Lock()
	if cc.inflight[key] {
		cc.mu.Unlock()
		return
	}
	cc.inflight[key] = true
	cc.mu.Unlock()
	go func() {
		defer func() {
			cc.mu.Lock()
			delete(cc.inflight, key)
			cc.mu.Unlock()
		}()
		err := cc.attach(ctx, c, access, va, volumes, nodes)
		cc.fail(csiKey(cluster), "VolumeAttachment "+va.Name, err)
	}()
}

// attach plays the external attacher on one VolumeAttachment: its
// finalizer first, then the call, then status.attached (or attachError),
// or for one being deleted, the finalizer's removal once detached.
func (cc *cloudController) attach(ctx context.Context, c inmemoryruntime.Client, access csiAccess,
	va *storagev1.VolumeAttachment, volumes []corev1.PersistentVolume, nodes []corev1.Node) error {
	source := va.Spec.Source.PersistentVolumeName
	i := slices.IndexFunc(volumes, func(pv corev1.PersistentVolume) bool { return source != nil && pv.Name == *source })
	if i < 0 || volumes[i].Spec.CSI == nil {
		return fmt.Errorf("VolumeAttachment %s: no CSI PersistentVolume %v", va.Name, source)
	}
	pv := &volumes[i]
	j := slices.IndexFunc(nodes, func(n corev1.Node) bool { return n.Name == va.Spec.NodeName })
	if j < 0 {
		return fmt.Errorf("VolumeAttachment %s: node %s not found", va.Name, va.Spec.NodeName)
	}
	vm, err := nodeVM(&nodes[j])
	if err != nil {
		return err
	}
	if !va.DeletionTimestamp.IsZero() {
		if err := cc.unpublish(ctx, access, pv.Spec.CSI.VolumeHandle, vm); err != nil {
			return err
		}
		return releaseAttachment(ctx, c, va)
	}
	// The attacher attaches only what it holds its finalizer on: a
	// VolumeAttachment deleted meanwhile is left alone.
	cur := &storagev1.VolumeAttachment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(va), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !cur.DeletionTimestamp.IsZero() {
		return nil
	}
	if controllerutil.AddFinalizer(cur, csiAttacherFinalizer) {
		if err := c.Update(ctx, cur); err != nil {
			return err
		}
	}
	rwx := slices.Contains(pv.Spec.AccessModes, corev1.ReadWriteMany)
	publishErr := cc.publish(ctx, access, pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.VolumeAttributes, rwx, vm)
	return errors.Join(publishErr, updateAttachment(ctx, c, va, func(cur *storagev1.VolumeAttachment) {
		cur.Status.Attached = publishErr == nil
		cur.Status.AttachError = nil
		if publishErr != nil {
			cur.Status.AttachError = &storagev1.VolumeError{Time: metav1.Now(), Message: "rpc error: " + publishErr.Error()}
		}
	}))
}

// releaseAttachment takes the attacher's finalizer off a VolumeAttachment
// being deleted, which then goes.
func releaseAttachment(ctx context.Context, c inmemoryruntime.Client, va *storagev1.VolumeAttachment) error {
	cur := &storagev1.VolumeAttachment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(va), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	controllerutil.RemoveFinalizer(cur, csiAttacherFinalizer)
	return updateReleasing(ctx, c, cur)
}

// updateAttachment changes the VolumeAttachment as it is now.
func updateAttachment(ctx context.Context, c inmemoryruntime.Client, va *storagev1.VolumeAttachment, change func(*storagev1.VolumeAttachment)) error {
	cur := &storagev1.VolumeAttachment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(va), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	change(cur)
	return c.Update(ctx, cur)
}

// nodeVM is the VM behind a tenant Node, from the node ID the driver's
// node plugin registers (cmd/kubevirt-csi-driver resolveNodeID): its
// provider ID kubevirt://<VM> and the namespace Cluster API annotates.
// The controller uses only the name; the namespace is its own flag's.
func nodeVM(node *corev1.Node) (string, error) {
	name, ok := strings.CutPrefix(node.Spec.ProviderID, "kubevirt://")
	if !ok || name == "" || node.Annotations["cluster.x-k8s.io/cluster-namespace"] == "" {
		return "", fmt.Errorf("node %s: vmName or vmNamespace not found: it needs a kubevirt:// provider ID and the cluster.x-k8s.io/cluster-namespace annotation", node.Name)
	}
	return name, nil
}

// publish is the driver's ControllerPublishVolume: a volume that is not
// ReadWriteMany may be in no other VM instance; the DataVolume and the VM
// must exist; the volume is hot-plugged into the VM unless its spec holds
// it, and the call returns once the instance reports it Ready.
func (cc *cloudController) publish(ctx context.Context, access csiAccess, volume string, attrs map[string]string, rwx bool, vm string) error {
	if !rwx {
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		if err := access.client.List(ctx, vmis, client.InNamespace(access.namespace)); err != nil {
			return fmt.Errorf("failed to check if volume is already attached: %w", err)
		}
		for _, vmi := range vmis.Items {
			if vmi.Name != vm && slices.ContainsFunc(vmi.Status.VolumeStatus, func(vs kubevirtv1.VolumeStatus) bool { return vs.Name == volume }) {
				return errors.New("volume is attached to another VM")
			}
		}
	}
	if _, err := access.dataVolume(ctx, volume); apierrors.IsNotFound(err) {
		return fmt.Errorf("volume %s not found", volume)
	} else if err != nil {
		return err
	}
	// The fast path: nothing to do if the VM's spec holds it.
	inSpec, err := access.vmHasVolume(ctx, vm, volume, false)
	if err != nil {
		return err
	}
	if inSpec {
		return nil
	}
	add := &kubevirtv1.AddVolumeOptions{Name: volume,
		Disk: &kubevirtv1.Disk{Serial: attrs[csiSerialKey],
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBus(attrs[csiBusKey])}}},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: volume}}}
	if err := cc.retry(ctx, access, vm, func() error {
		// Each attempt looks at the VM first: one that took the volume
		// from an attempt whose answer was lost is not asked again.
		if plugged, err := access.vmHasVolume(ctx, vm, volume, true); err != nil || plugged {
			return err
		}
		return PutVirtSubresource(ctx, access.virt, access.namespace, "virtualmachines", vm, "addvolume", add)
	}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, hotplugTimeout, true, func(ctx context.Context) (bool, error) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := access.client.Get(ctx, types.NamespacedName{Namespace: access.namespace, Name: vm}, vmi); err != nil {
			return false, err
		}
		if !slices.ContainsFunc(vmi.Status.VolumeStatus, func(vs kubevirtv1.VolumeStatus) bool {
			return vs.Name == volume && vs.Phase == kubevirtv1.VolumeReady
		}) {
			return false, nil
		}
		return access.vmHasVolume(ctx, vm, volume, false)
	})
}

// unpublish is the driver's ControllerUnpublishVolume: unless neither
// the VM's spec nor its instance holds the volume, it is removed from the
// VM (or, with the VM gone or no longer holding it, from the instance),
// and the call returns once both are rid of it.
func (cc *cloudController) unpublish(ctx context.Context, access csiAccess, volume, vm string) error {
	attached, err := access.stillAttached(ctx, vm, volume)
	if err != nil || !attached {
		return err
	}
	if err := cc.retry(ctx, access, vm, func() error {
		remove := &kubevirtv1.RemoveVolumeOptions{Name: volume}
		plugged, err := access.vmHasVolume(ctx, vm, volume, true)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if plugged {
			return PutVirtSubresource(ctx, access.virt, access.namespace, "virtualmachines", vm, "removevolume", remove)
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := access.client.Get(ctx, types.NamespacedName{Namespace: access.namespace, Name: vm}, vmi); err != nil {
			return client.IgnoreNotFound(err)
		}
		if slices.ContainsFunc(vmi.Status.VolumeStatus, func(vs kubevirtv1.VolumeStatus) bool { return vs.HotplugVolume != nil && vs.Name == volume }) {
			return PutVirtSubresource(ctx, access.virt, access.namespace, "virtualmachineinstances", vm, "removevolume", remove)
		}
		return nil
	}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, hotplugTimeout, true, func(ctx context.Context) (bool, error) {
		attached, err := access.stillAttached(ctx, vm, volume)
		return !attached, err
	})
}

// retry runs an addvolume or removevolume call with the driver's
// back-off. Like the driver, it logs each failure (here: keeps it as the
// VM's last CSI error) and returns only that it timed out.
func (cc *cloudController) retry(ctx context.Context, access csiAccess, vm string, call func() error) error {
	return wait.ExponentialBackoffWithContext(ctx, hotplugBackoff, func(context.Context) (bool, error) {
		err := call()
		cc.fail(csiKey(access.cluster), "VirtualMachine "+vm, err)
		return err == nil, nil
	})
}

// vmHasVolume says whether the VM's template holds a claim or DataVolume
// volume of that name (EnsureVolumeAvailableVM); with hotplugged, only a
// hot-pluggable DataVolume counts (isVolumeAttached, removeVolumeFromVm).
func (a csiAccess) vmHasVolume(ctx context.Context, vm, volume string, hotplugged bool) (bool, error) {
	obj := &kubevirtv1.VirtualMachine{}
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: vm}, obj); err != nil {
		return false, err
	}
	return slices.ContainsFunc(obj.Spec.Template.Spec.Volumes, func(v kubevirtv1.Volume) bool {
		if hotplugged {
			return v.Name == volume && v.DataVolume != nil && v.DataVolume.Hotpluggable
		}
		return v.Name == volume && (v.DataVolume != nil || v.PersistentVolumeClaim != nil)
	}), nil
}

// stillAttached says whether the VM's spec or its instance's hot-plug
// status still holds the volume; a VM or instance that is gone holds
// nothing.
func (a csiAccess) stillAttached(ctx context.Context, vm, volume string) (bool, error) {
	inSpec, err := a.vmHasVolume(ctx, vm, volume, false)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	if inSpec {
		return true, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: vm}, vmi); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return slices.ContainsFunc(vmi.Status.VolumeStatus, func(vs kubevirtv1.VolumeStatus) bool {
		return vs.HotplugVolume != nil && vs.Name == volume
	}), nil
}

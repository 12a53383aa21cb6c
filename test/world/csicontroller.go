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
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
)

// What kubevirt-csi-driver (csi-driver 27b52aa2 pkg/service/controller.go,
// cmd/kubevirt-csi-driver) and its sidecars name and mark.
const (
	// csiDriverName is the driver's name: the tenant StorageClass's
	// provisioner and its VolumeAttachments' attacher.
	csiDriverName = "csi.kubevirt.io"
	// csiVolumePrefix starts every volume's name: the external
	// provisioner names it "pvc-" and the claim's UID, and the driver
	// acts only on DataVolumes named so (--volume-prefix, "pvc").
	csiVolumePrefix = "pvc-"
	// csiAttacherFinalizer is the external attacher's finalizer on the
	// VolumeAttachments it attached ("external-attacher/" and the driver
	// name with dots as dashes).
	csiAttacherFinalizer = "external-attacher/csi-kubevirt-io"
	// provisionedByAnnotation names the provisioner of a PersistentVolume.
	provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
	// Volume context keys CreateVolume returns, for ControllerPublish.
	csiBusKey    = "bus"
	csiSerialKey = "serial"
)

// csiAccess is how a tenant's CSI controller reaches the infra cluster:
// the kubeconfig mounted at --infra-cluster-kubeconfig, the namespace of
// --infra-cluster-namespace and the labels of --infra-cluster-labels,
// which it puts on every DataVolume and requires on those it touches.
type csiAccess struct {
	credentialClient
	labels map[string]string
	// cluster is the tenant's, to keep errors by.
	cluster string
}

// csiKey is where the CSI controller's failures are kept, apart from the
// CCM's.
func csiKey(cluster string) string { return cluster + " csi" }

// syncCSI has the cluster's CSI controller, if it runs, do what the
// external provisioner and attacher ask of kubevirt-csi-driver's
// controller service, and what Kubernetes' PV controller does beside
// them: a claim of its StorageClass gets a DataVolume and a bound
// PersistentVolume; a VolumeAttachment of its driver is hot-plugged into
// the VM of its Node, and unplugged when deleted; a released volume whose
// reclaim policy is Delete is deleted, with its DataVolume. Every infra
// call goes through the credential; what fails is kept as the object's
// error and tried again on the next call.
func (cc *cloudController) syncCSI(ctx context.Context, c inmemoryruntime.Client, cluster string) error {
	d, found, err := findCSIController(ctx, c)
	if err != nil || !found {
		return err
	}
	var classes []storagev1.StorageClass
	var claims []corev1.PersistentVolumeClaim
	var volumes []corev1.PersistentVolume
	var attachments []storagev1.VolumeAttachment
	var nodes []corev1.Node
	storage := func(kind string) schema.GroupVersionKind { return storagev1.SchemeGroupVersion.WithKind(kind) }
	core := func(kind string) schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind(kind) }
	if err := errors.Join(listAs(ctx, c, storage("StorageClassList"), &classes), listAs(ctx, c, core("PersistentVolumeClaimList"), &claims),
		listAs(ctx, c, core("PersistentVolumeList"), &volumes), listAs(ctx, c, storage("VolumeAttachmentList"), &attachments),
		listAs(ctx, c, core("NodeList"), &nodes)); err != nil {
		return err
	}
	pending := pendingClaims(claims, classes)
	released := releasedVolumes(volumes, claims)
	work := pendingAttachments(attachments)
	if len(pending) == 0 && len(released) == 0 && len(work) == 0 {
		return nil
	}
	access, err := cc.csiAccess(ctx, c, cluster, d)
	if err == nil {
		err = cc.reach(ctx, nodes, access.credentialClient)
	}
	callCtx, cancel := context.WithTimeout(ctx, cloudCallTimeout)
	defer cancel()
	for _, p := range pending {
		claimErr := err
		if claimErr == nil {
			claimErr = cc.provision(callCtx, c, access, p.claim, p.class)
		}
		cc.fail(csiKey(cluster), "PersistentVolumeClaim "+p.claim.Namespace+"/"+p.claim.Name, claimErr)
	}
	for _, pv := range released {
		pvErr := err
		if pvErr == nil {
			pvErr = cc.deleteVolume(callCtx, c, access, pv)
		}
		cc.fail(csiKey(cluster), "PersistentVolume "+pv.Name, pvErr)
	}
	for _, va := range work {
		if err != nil {
			cc.fail(csiKey(cluster), "VolumeAttachment "+va.Name, err)
			continue
		}
		cc.startAttacher(ctx, c, cluster, access, va, volumes, nodes)
	}
	return nil
}

// csiAccess reads the controller's flags and the kubeconfig it mounts.
func (cc *cloudController) csiAccess(ctx context.Context, c inmemoryruntime.Client, cluster string, d addonDeployment) (csiAccess, error) {
	kubeconfig, err := d.file(ctx, c, d.arg("--infra-cluster-kubeconfig"))
	if err != nil {
		return csiAccess{}, fmt.Errorf("reading the infra kubeconfig: %w", err)
	}
	access := csiAccess{labels: map[string]string{}, cluster: cluster}
	if access.credentialClient, err = cc.credential(cluster+" csi", kubeconfig); err != nil {
		return csiAccess{}, err
	}
	if access.namespace, err = d.expand(ctx, c, d.arg("--infra-cluster-namespace")); err != nil {
		return csiAccess{}, err
	}
	labels := d.arg("--infra-cluster-labels")
	if labels == "" {
		// The driver does not start without them.
		return csiAccess{}, errors.New("infra-cluster-labels must be set")
	}
	for _, pair := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return csiAccess{}, fmt.Errorf("infra-cluster-labels: %q is not name=value", pair)
		}
		access.labels[k] = v
	}
	return access, nil
}

// claimOfClass is a claim the provisioner has to provision, with its
// StorageClass.
type claimOfClass struct {
	claim *corev1.PersistentVolumeClaim
	class *storagev1.StorageClass
}

// pendingClaims are the unbound claims of the driver's StorageClasses. A
// claim that names no class gets the default one, as the API server's
// DefaultStorageClass admission sets it (the in-memory tenant server has
// no admission).
func pendingClaims(claims []corev1.PersistentVolumeClaim, classes []storagev1.StorageClass) []claimOfClass {
	var out []claimOfClass
	for i := range claims {
		claim := &claims[i]
		if claim.Spec.VolumeName != "" || !claim.DeletionTimestamp.IsZero() {
			continue
		}
		for j := range classes {
			class := &classes[j]
			named := claim.Spec.StorageClassName != nil && *claim.Spec.StorageClassName == class.Name
			byDefault := claim.Spec.StorageClassName == nil && class.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
			if class.Provisioner == csiDriverName && (named || byDefault) {
				out = append(out, claimOfClass{claim: claim, class: class})
				break
			}
		}
	}
	return out
}

// provision does CreateVolume for a claim, then what the external
// provisioner and the PV controller do with its answer: a
// PersistentVolume for the DataVolume, bound to the claim.
func (cc *cloudController) provision(ctx context.Context, c inmemoryruntime.Client, access csiAccess, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	if claim.UID == "" {
		return fmt.Errorf("claim %s/%s has no UID to name its volume after", claim.Namespace, claim.Name)
	}
	name := csiVolumePrefix + string(claim.UID)
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	rwx := slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany)
	if rwx && (claim.Spec.VolumeMode == nil || *claim.Spec.VolumeMode != corev1.PersistentVolumeBlock) {
		// validateCreateVolumeRequest: a file system cannot be shared.
		return fmt.Errorf("failed to provision volume with StorageClass %q: non-block volume with RWX access mode is not supported", class.Name)
	}
	serial, err := cc.createVolume(ctx, access, name, size, class.Parameters["infraStorageClassName"], rwx)
	if err != nil {
		return fmt.Errorf("failed to provision volume with StorageClass %q: %w", class.Name, err)
	}
	bus := class.Parameters[csiBusKey]
	if bus == "" {
		bus = "scsi"
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedByAnnotation: csiDriverName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes: claim.Spec.AccessModes, VolumeMode: claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaim, StorageClassName: class.Name,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: csiDriverName, VolumeHandle: name, FSType: "ext4",
				VolumeAttributes: map[string]string{csiBusKey: bus, csiSerialKey: serial}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	if err := c.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The PV controller binds the claim to the volume made for it.
	claim.Spec.VolumeName = name
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
	claim.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: claim.Spec.AccessModes,
		Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}
	return c.Update(ctx, claim)
}

// createVolume is the driver's CreateVolume: a blank DataVolume named for
// the volume, with the driver's labels, kept after its import, and
// nothing waited for. It returns the DataVolume's UID, the disk's serial.
func (cc *cloudController) createVolume(ctx context.Context, access csiAccess, name string, size resource.Quantity, infraClass string, rwx bool) (string, error) {
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: access.namespace, Name: name, Labels: maps.Clone(access.labels),
			Annotations: map[string]string{"cdi.kubevirt.io/storage.deleteAfterCompletion": "false"}},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewScaledQuantity(size.Value(), 0)}}},
		},
	}
	if rwx {
		dv.Spec.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}
	if infraClass != "" {
		dv.Spec.Storage.StorageClassName = &infraClass
	}
	existing := &cdiv1.DataVolume{}
	err := access.client.Get(ctx, types.NamespacedName{Namespace: access.namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := access.client.Create(ctx, dv); err != nil {
			return "", err
		}
		return string(dv.UID), nil
	case err != nil:
		return "", err
	}
	if existing.Spec.Storage != nil {
		have := existing.Spec.Storage.Resources.Requests[corev1.ResourceStorage]
		if have.Cmp(dv.Spec.Storage.Resources.Requests[corev1.ResourceStorage]) != 0 {
			return "", errors.New("requested storage size does not match existing size")
		}
	}
	return string(existing.UID), nil
}

// releasedVolumes are the driver's volumes whose claim is gone and whose
// reclaim policy is Delete: the PV controller has them deleted by their
// provisioner.
func releasedVolumes(volumes []corev1.PersistentVolume, claims []corev1.PersistentVolumeClaim) []*corev1.PersistentVolume {
	var out []*corev1.PersistentVolume
	for i := range volumes {
		pv := &volumes[i]
		if pv.Annotations[provisionedByAnnotation] != csiDriverName || pv.Spec.ClaimRef == nil ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			continue
		}
		ref := pv.Spec.ClaimRef
		if !slices.ContainsFunc(claims, func(c corev1.PersistentVolumeClaim) bool {
			return c.Namespace == ref.Namespace && c.Name == ref.Name && c.UID == ref.UID
		}) {
			out = append(out, pv)
		}
	}
	return out
}

// deleteVolume is the driver's DeleteVolume, then the volume's removal:
// the DataVolume is deleted if it is the driver's (its labels and name
// prefix), and then the PersistentVolume.
func (cc *cloudController) deleteVolume(ctx context.Context, c inmemoryruntime.Client, access csiAccess, pv *corev1.PersistentVolume) error {
	if err := cc.deleteDataVolume(ctx, access, pv.Spec.CSI.VolumeHandle); err != nil {
		return fmt.Errorf("deleting volume %s: %w", pv.Name, err)
	}
	if err := c.Delete(ctx, pv); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// deleteDataVolume deletes one of the driver's DataVolumes; one that is
// gone already is deleted.
func (cc *cloudController) deleteDataVolume(ctx context.Context, access csiAccess, name string) error {
	dv, err := access.dataVolume(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return access.client.Delete(ctx, dv)
}

// dataVolume is the driver's GetDataVolume: a DataVolume it did not make
// (without its labels or name prefix) is an invalid volume.
func (a csiAccess) dataVolume(ctx context.Context, name string) (*cdiv1.DataVolume, error) {
	dv := &cdiv1.DataVolume{}
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: name}, dv); err != nil {
		return nil, err
	}
	for k, v := range a.labels {
		if dv.Labels[k] != v {
			return nil, errors.New("invalid volume name")
		}
	}
	if !strings.HasPrefix(dv.Name, csiVolumePrefix) {
		return nil, errors.New("invalid volume name")
	}
	return dv, nil
}

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

package inplace

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// Targets says why a machine's running VM would never be live migrated
// onto a hot-plugged CPU or memory, empty when it would. A hot-plug rides
// a live migration that virt-controller starts only when KubeVirt's
// workload update methods include LiveMigrate (a stock install has none),
// and whose target pod KubeVirt places under the VM's own node placement
// and never on the source node; without either the update never ends, so
// the change is declined instead.
type Targets interface {
	NoTarget(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) (string, error)
}

// Claims says why the named disks of a machine's running VM cannot grow,
// empty when they can.
type Claims interface {
	NoGrowth(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine, disks map[string]resource.Quantity) (string, error)
}

// InfraChecks reads what the hooks check on a machine's infra cluster,
// which it opens as the machine controller does: Targets and Claims.
type InfraChecks struct {
	// Clients opens the infra cluster.
	Clients *infracluster.Clients
}

// open opens the machine's infra cluster with the same user and VM
// namespace as the machine controller (machine.Scope.SetAccess).
func (t *InfraChecks) open(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) infracluster.Access {
	spec := field.NewPath("spec")
	return t.Clients.Open(ctx, tenancy.MachineSource(&km.Spec, kc, spec), km.Namespace, tenancy.MachineRequest(&km.Spec, spec),
		infracluster.User{Kind: "KubevirtMachine", NamespacedName: client.ObjectKeyFromObject(km)})
}

// NoTarget reads KubeVirt's workload update methods, then the machine's
// VM instance and the infra nodes, and asks NoOtherNode. Methods it cannot
// read decline, as a claim the provider cannot finish is not made; a
// machine whose infra cluster is not available, whose instance is not
// there, or whose nodes the provider may not list, is left to the
// LiveMigratable condition.
func (t *InfraChecks) NoTarget(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) (string, error) {
	access := t.open(ctx, kc, km)
	if !access.Available() {
		return "", nil
	}
	if why, err := kubevirtLacks(ctx, access.Infra.APIReader, migratesWorkloads, "whether virt-controller would start the migration",
		"virt-controller would never start the migration: KubeVirt's spec.workloadUpdateStrategy.workloadUpdateMethods lacks LiveMigrate (docs/in-place-updates.md#turning-it-on)"); why != "" || err != nil {
		return why, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := access.Infra.Client.Get(ctx, types.NamespacedName{Namespace: access.Infra.Namespace, Name: km.Name}, vmi); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	nodes := &corev1.NodeList{}
	switch err := access.Infra.Client.List(ctx, nodes); {
	case apierrors.IsForbidden(err):
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot list infra nodes; in-place updates do not check for a migration target", "reason", err.Error())
		return "", nil
	case err != nil:
		return "", fmt.Errorf("listing the infra nodes: %w", err)
	}
	return NoOtherNode(vmi, nodes.Items), nil
}

// NoOtherNode says why none of nodes but the instance's own could take
// the instance's migration target pod: Ready, schedulable by KubeVirt and
// the scheduler, matching the instance's node selector and required node
// affinity, with every NoSchedule and NoExecute taint tolerated. Empty
// when one could. Resources and pod affinities are the scheduler's to
// judge; InPlaceUpdated reports a target pod it leaves pending.
func NoOtherNode(vmi *kubevirtv1.VirtualMachineInstance, nodes []corev1.Node) string {
	placement := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: vmi.Spec.NodeSelector, Affinity: vmi.Spec.Affinity}})
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	others := 0
	for i := range nodes {
		n := &nodes[i]
		if n.Name == vmi.Status.NodeName {
			continue
		}
		others++
		if !util.IsNodeReady(n) || n.Spec.Unschedulable || n.Labels[kubevirtv1.NodeSchedulable] != "true" {
			continue
		}
		if ok, err := placement.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, vmi.Spec.Tolerations, noSchedule, false); untolerated {
			continue
		}
		return ""
	}
	return fmt.Sprintf("no infra node but %s can take the VM, so the live migration would never start: "+
		"none of the %d others is Ready, schedulable for KubeVirt, allowed by the VM's node placement and free of taints it does not tolerate",
		vmi.Status.NodeName, others)
}

// expandDisksGate is KubeVirt's feature gate without which virt-launcher
// leaves a disk at its size when its claim grows (pkg/virt-launcher,
// v1.7.0).
const expandDisksGate = "ExpandDisks"

// NoGrowth says why the disks of the machine's running VM cannot grow to
// the sizes given: KubeVirt's ExpandDisks feature gate is off, a disk's
// claim is of a storage class that does not allow expansion, or the infra
// cluster refuses the provider's growth of the claim (a dry run of the
// machine controller's own patch: its rights, a ResourceQuota, admission).
// What it cannot read counts as unable: a claim the provider cannot finish
// is not made.
func (t *InfraChecks) NoGrowth(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine, disks map[string]resource.Quantity) (string, error) {
	access := t.open(ctx, kc, km)
	if !access.Available() {
		return "its infra cluster is not available to check the disks' storage classes: " + access.Outcome.Message, nil
	}
	infra := access.Infra
	if why, err := kubevirtLacks(ctx, infra.APIReader, expandsDisks, "whether its "+expandDisksGate+" feature gate is on",
		"KubeVirt's "+expandDisksGate+" feature gate is off, so the running VM would not see a larger claim"); why != "" || err != nil {
		return why, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := infra.Client.Get(ctx, types.NamespacedName{Namespace: infra.Namespace, Name: km.Name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return "its VM instance is not running", nil
		}
		return "", err
	}
	for _, disk := range slices.Sorted(maps.Keys(disks)) {
		i := slices.IndexFunc(vmi.Status.VolumeStatus, func(vs kubevirtv1.VolumeStatus) bool { return vs.Name == disk })
		if i < 0 || vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo == nil {
			return fmt.Sprintf("KubeVirt has not reported the claim of disk %s", disk), nil
		}
		claim := vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo
		key := types.NamespacedName{Namespace: infra.Namespace, Name: claim.ClaimName}
		why, err := noExpansion(ctx, infra.APIReader, key)
		need, has := ClaimRequest(disks[disk], claim.FilesystemOverhead), claim.Requests[corev1.ResourceStorage]
		if why == "" && err == nil && has.Cmp(need) < 0 {
			why, err = refusedGrowth(ctx, infra.Client, key, need)
		}
		if why != "" || err != nil {
			return fmt.Sprintf("disk %s: %s", disk, why), err
		}
	}
	return "", nil
}

// refusedGrowth says why the infra cluster refuses to grow the claim to
// request, from a dry run of the patch the machine controller sends.
func refusedGrowth(ctx context.Context, c client.Client, key types.NamespacedName, request resource.Quantity) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := fmt.Appendf(nil, `{"spec":{"resources":{"requests":{"storage":%q}}}}`, request.String())
	err := c.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, patch), client.DryRunAll)
	switch {
	case err == nil:
		return "", nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Sprintf("the infra cluster refuses to grow claim %s to %s: %s", key.Name, request.String(), err.Error()), nil
	}
	return "", fmt.Errorf("trying the growth of claim %s: %w", key.Name, err)
}

// noExpansion says why the claim cannot grow: its storage class does not
// allow expansion, which the API server's PersistentVolumeClaimResize
// admission enforces too.
func noExpansion(ctx context.Context, c client.Reader, key types.NamespacedName) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, key, pvc); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return fmt.Sprintf("cannot read claim %s: %s", key.Name, err.Error()), nil
		}
		return "", err
	}
	class := ptr.Deref(pvc.Spec.StorageClassName, "")
	if class == "" {
		return fmt.Sprintf("claim %s has no storage class, and only a class allows expansion", key.Name), nil
	}
	sc := &storagev1.StorageClass{}
	if err := c.Get(ctx, types.NamespacedName{Name: class}, sc); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return fmt.Sprintf("cannot read storage class %s of claim %s: %s", class, key.Name, err.Error()), nil
		}
		return "", err
	}
	if !ptr.Deref(sc.AllowVolumeExpansion, false) {
		return fmt.Sprintf("storage class %s of claim %s does not allow volume expansion", class, key.Name), nil
	}
	return "", nil
}

// kubevirtLacks reads the infra cluster's KubeVirt configuration and says
// why: missing, when no KubeVirt CR has what has looks for, or that the
// provider cannot tell what, when it may not read them. Empty when one has.
func kubevirtLacks(ctx context.Context, r client.Reader, has func(kubevirtv1.KubeVirt) bool, what, missing string) (string, error) {
	kvs := &kubevirtv1.KubeVirtList{}
	switch err := r.List(ctx, kvs); {
	case err != nil && (apierrors.IsForbidden(err) || meta.IsNoMatchError(err)):
		return "the provider cannot read KubeVirt's configuration to tell " + what + ": " + err.Error(), nil
	case err != nil:
		return "", fmt.Errorf("reading the KubeVirt configuration: %w", err)
	case !slices.ContainsFunc(kvs.Items, has):
		return missing, nil
	}
	return "", nil
}

// expandsDisks reports whether a KubeVirt installation grows running
// disks with their claims.
func expandsDisks(kv kubevirtv1.KubeVirt) bool {
	dc := kv.Spec.Configuration.DeveloperConfiguration
	return dc != nil && slices.Contains(dc.FeatureGates, expandDisksGate)
}

// migratesWorkloads reports whether a KubeVirt installation live migrates
// running VMs onto a changed spec, which a CPU or memory hot-plug needs
// (pkg/virt-controller/watch/workload-updater, v1.7.0).
func migratesWorkloads(kv kubevirtv1.KubeVirt) bool {
	return slices.Contains(kv.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods, kubevirtv1.WorkloadUpdateMethodLiveMigrate)
}

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
)

// Targets says why no other infra node can take a machine's running VM,
// empty when one can. A hot-plug rides a live migration, whose target pod
// KubeVirt places under the VM's own node placement and never on the
// source node; with no such node the migration stays Scheduling and the
// update never ends, so the change is declined instead.
type Targets interface {
	NoTarget(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) (string, error)
}

// InfraTargets finds a machine's VM instance and the infra nodes on its
// infra cluster, as the machine controller does.
type InfraTargets struct {
	// Clients opens the infra cluster.
	Clients *infracluster.Clients
}

// NoTarget reads the machine's VM instance and the infra nodes and asks
// NoOtherNode. A machine whose infra cluster is not available, whose
// instance is not there, or whose nodes the provider may not list, is
// left to the LiveMigratable condition.
func (t *InfraTargets) NoTarget(ctx context.Context, kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) (string, error) {
	ref := km.Spec.InfraClusterSecretRef
	if ref == nil {
		ref = kc.Spec.InfraClusterSecretRef
	}
	// The same infra cluster, user and VM namespace as the machine
	// controller's (machine.Scope.VMNamespace).
	access := t.Clients.Open(ctx, ref, km.Namespace, km.Spec.VirtualMachineTemplate.ObjectMeta.Namespace,
		infracluster.User{Kind: "KubevirtMachine", NamespacedName: client.ObjectKeyFromObject(km)})
	if !access.Available() {
		return "", nil
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

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

package machine

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// countFreeDevices adds to an InsufficientDevices state how many of each
// short device are free: what the infra nodes advertise, less what the VM
// instances placed on those nodes hold. Both are read from the API server,
// bounded in time: the provider's cache of an external infra cluster
// watches no Nodes (its credential may not list them) and only the VMs'
// namespace. Only the VM instances of the nodes with the devices are
// listed, in one call by KubeVirt's node label. An infra cluster whose
// nodes the provider may not read keeps the scheduler's words alone.
func countFreeDevices(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance, state vmstatus.State) vmstatus.State {
	if state.Reason != infrav1.InsufficientDevicesReason {
		return state
	}
	short := vmstatus.ShortDevices(vmi)
	readCtx, cancel := context.WithTimeout(ctx, infraReadTimeout)
	defer cancel()
	reader := sc.Access.Infra.APIReader
	nodes := &corev1.NodeList{}
	if err := reader.List(readCtx, nodes); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot list infra nodes; free devices are not counted", "reason", err.Error())
		return state
	}
	var withDevices []string
	for _, n := range nodes.Items {
		if slices.ContainsFunc(short, func(d vmstatus.DeviceShortage) bool {
			return !n.Status.Allocatable.Name(d.Resource, resource.DecimalSI).IsZero()
		}) {
			withDevices = append(withDevices, n.Name)
		}
	}
	placed := &kubevirtv1.VirtualMachineInstanceList{}
	if len(withDevices) > 0 {
		onNodes, err := labels.NewRequirement(kubevirtv1.NodeNameLabel, selection.In, withDevices)
		if err == nil {
			err = reader.List(readCtx, placed, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*onNodes)})
		}
		if err != nil {
			ctrl.LoggerFrom(ctx).V(2).Info("Cannot list the VM instances of the device nodes; free devices are not counted", "reason", err.Error())
			return state
		}
	}
	counts := map[corev1.ResourceName]vmstatus.DeviceCount{}
	for _, d := range short {
		counts[d.Resource] = vmstatus.CountDevices(nodes.Items, placed.Items, d.Resource)
	}
	state.Message = vmstatus.DevicesMessage(vmi, counts)
	return state
}

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

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// countFreeDevices adds to an InsufficientDevices state how many of each
// short device are free: what the infra nodes advertise, less what the VM
// instances placed there hold, both read from the infra cluster's cache,
// which already watches them. An infra cluster whose nodes the provider
// may not read keeps the scheduler's words alone.
func countFreeDevices(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance, state vmstatus.State) vmstatus.State {
	if state.Reason != infrav1.InsufficientDevicesReason {
		return state
	}
	reader := sc.Access.Infra.Client
	nodes := &corev1.NodeList{}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := reader.List(ctx, nodes); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot list infra nodes; free devices are not counted", "reason", err.Error())
		return state
	}
	if err := reader.List(ctx, vmis); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot list VM instances; free devices are not counted", "reason", err.Error())
		return state
	}
	counts := map[corev1.ResourceName]vmstatus.DeviceCount{}
	for _, d := range vmstatus.ShortDevices(vmi) {
		counts[d.Resource] = vmstatus.CountDevices(nodes.Items, vmis.Items, d.Resource)
	}
	state.Message = vmstatus.DevicesMessage(vmi, counts)
	return state
}

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
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

const a10 = "nvidia.com/GA102GL_A10"

// deviceVMI asks for the GPUs and host devices named, in its phase, with
// the scheduler's message when it is Scheduling.
func deviceVMI(phase kubevirtv1.VirtualMachineInstancePhase, node, scheduler string, gpus []string, hostDevices ...string) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node}}
	for i, g := range gpus {
		v.Spec.Domain.Devices.GPUs = append(v.Spec.Domain.Devices.GPUs, kubevirtv1.GPU{Name: "gpu" + string(rune('0'+i)), DeviceName: g})
	}
	for i, h := range hostDevices {
		v.Spec.Domain.Devices.HostDevices = append(v.Spec.Domain.Devices.HostDevices, kubevirtv1.HostDevice{Name: "dev" + string(rune('0'+i)), DeviceName: h})
	}
	if scheduler != "" {
		v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: "PodScheduled", Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: scheduler}}
	}
	return v
}

func TestShortDevices(t *testing.T) {
	for _, tc := range []struct {
		name string
		vmi  *kubevirtv1.VirtualMachineInstance
		want []DeviceShortage
	}{
		{"two GPUs of a model none has free", deviceVMI(kubevirtv1.Scheduling, "",
			"0/4 nodes are available: 1 Insufficient nvidia.com/GA102GL_A10, 3 node(s) had untolerated taint.", []string{a10, a10}),
			[]DeviceShortage{{Resource: a10, Wanted: 2}}},
		{"the message's last resource", deviceVMI(kubevirtv1.Scheduling, "", "0/3 nodes are available: 3 Insufficient nvidia.com/GA102GL_A10.", []string{a10}),
			[]DeviceShortage{{Resource: a10, Wanted: 1}}},
		{"a host device, not the GPU the scheduler had", deviceVMI(kubevirtv1.Scheduling, "",
			"0/3 nodes are available: 3 Insufficient intel.com/qat.", []string{a10}, "intel.com/qat"),
			[]DeviceShortage{{Resource: "intel.com/qat", Wanted: 1}}},
		{"a name that only prefixes the insufficient one", deviceVMI(kubevirtv1.Scheduling, "",
			"0/3 nodes are available: 3 Insufficient nvidia.com/GA102GL_A10_24Q.", []string{a10}), nil},
		{"short of memory only", deviceVMI(kubevirtv1.Scheduling, "", "0/3 nodes are available: 3 Insufficient memory.", []string{a10}), nil},
		{"scheduled", deviceVMI(kubevirtv1.Scheduled, "infra-gpu", "", []string{a10}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShortDevices(tc.vmi); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCountDevices(t *testing.T) {
	node := func(name string, gpus int64) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("16")}}}
		if gpus > 0 {
			n.Status.Allocatable[a10] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return n
	}
	nodes := []corev1.Node{node("gpu-a", 2), node("gpu-b", 1), node("plain", 0)}
	vmis := []kubevirtv1.VirtualMachineInstance{
		*deviceVMI(kubevirtv1.Running, "gpu-a", "", []string{a10, a10}),
		*deviceVMI(kubevirtv1.Succeeded, "gpu-b", "", []string{a10}),         // finished: holds nothing
		*deviceVMI(kubevirtv1.Scheduling, "", "Insufficient", []string{a10}), // not placed
		*deviceVMI(kubevirtv1.Running, "plain", "", nil),
	}
	got := CountDevices(nodes, vmis, a10)
	if want := (DeviceCount{Nodes: 2, Total: 3, Held: 2}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got.Free() != 1 {
		t.Errorf("free: got %d, want 1", got.Free())
	}
	if over := (DeviceCount{Total: 1, Held: 2}); over.Free() != 0 {
		t.Errorf("more held than advertised: free %d, want 0", over.Free())
	}
}

func TestDevicesMessage(t *testing.T) {
	v := deviceVMI(kubevirtv1.Scheduling, "", "0/4 nodes are available: 1 Insufficient nvidia.com/GA102GL_A10, 3 Insufficient intel.com/qat.",
		[]string{a10, a10}, "intel.com/qat")
	got := DevicesMessage(v, map[corev1.ResourceName]DeviceCount{a10: {Nodes: 2, Total: 3, Held: 2}})
	want := "no infra node has free the devices the VM asks for: 2 nvidia.com/GA102GL_A10 (1 of 3 free on 2 infra nodes), 1 intel.com/qat; " +
		"the scheduler: 0/4 nodes are available: 1 Insufficient nvidia.com/GA102GL_A10, 3 Insufficient intel.com/qat."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := DevicesMessage(deviceVMI(kubevirtv1.Scheduling, "", "0/3 nodes are available: 3 Insufficient memory.", []string{a10}), nil); got != "" {
		t.Errorf("short of memory only: got %q, want none", got)
	}
}

func TestOfShortOfDevices(t *testing.T) {
	st := Of(nil, deviceVMI(kubevirtv1.Scheduling, "", "0/3 nodes are available: 3 Insufficient nvidia.com/GA102GL_A10.", []string{a10}), nil)
	if st.Reason != infrav1.InsufficientDevicesReason || !st.Warning {
		t.Fatalf("got %+v, want a warning with reason %s", st, infrav1.InsufficientDevicesReason)
	}
	st = Of(nil, deviceVMI(kubevirtv1.Scheduling, "", "0/3 nodes are available: 3 Insufficient memory.", []string{a10}), nil)
	if st.Reason != infrav1.UnschedulableReason {
		t.Errorf("short of memory: got reason %s, want %s", st.Reason, infrav1.UnschedulableReason)
	}
}

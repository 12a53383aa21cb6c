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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// builtVM is a VM as the builder made it from spec(nil), with a label of
// the provider's own.
func builtVM() *kubevirtv1.VirtualMachine {
	s := spec(nil)
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"capkv.io/machine": "m-1"}},
		Spec:       *s.VirtualMachineTemplate.Spec.DeepCopy(),
	}
}

func reserved(k string) bool { return k == "capkv.io/machine" }

func TestWantOf(t *testing.T) {
	g := NewWithT(t)
	w := WantOf(spec(nil))
	g.Expect(w.Sockets).To(Equal(uint32(2)))
	g.Expect(w.Guest.String()).To(Equal("4Gi"))

	preset := spec(func(_ *kubevirtv1.DomainSpec, s *infrav1.KubevirtMachineSpec) {
		s.Preset = &infrav1.PresetSpec{Name: "density"}
	})
	w = WantOf(preset)
	g.Expect(w.Sockets).To(BeZero(), "a preset sizes the VM, not the template")
	g.Expect(w.Guest).To(BeNil())
}

func TestVMPatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  func(w *Want)
		patch string
	}{
		{name: "nothing to do", want: func(*Want) {}},
		{name: "more sockets and memory", want: func(w *Want) {
			w.Sockets, w.Guest = 4, ptr.To(resource.MustParse("8Gi"))
		}, patch: `{"spec":{"template":{"spec":{"domain":{"cpu":{"sockets":4},"memory":{"guest":"8Gi"}}}}}}`},
		{name: "a label, not over the provider's own", want: func(w *Want) {
			w.Labels = map[string]string{"tier": "gold", "capkv.io/machine": "other"}
		}, patch: `{"metadata":{"labels":{"tier":"gold"}}}`},
		{name: "what the spec leaves to a preset", want: func(w *Want) { w.Sockets, w.Guest = 0, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := WantOf(spec(nil))
			tc.want(&w)
			patch, err := VMPatch(builtVM(), w, reserved)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.patch == "" {
				g.Expect(patch).To(BeNil())
				return
			}
			g.Expect(string(patch)).To(MatchJSON(tc.patch))
		})
	}
}

func TestProgress(t *testing.T) {
	grown := func() Want {
		w := WantOf(spec(nil))
		w.Sockets, w.Guest = 4, ptr.To(resource.MustParse("8Gi"))
		return w
	}
	running := func(mutate func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
		vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
			Phase:              kubevirtv1.Running,
			CurrentCPUTopology: &kubevirtv1.CPUTopology{Sockets: 2},
			Memory:             &kubevirtv1.MemoryStatus{GuestRequested: ptr.To(resource.MustParse("4Gi"))},
			Conditions: []kubevirtv1.VirtualMachineInstanceCondition{
				{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}},
		}}
		if mutate != nil {
			mutate(vmi)
		}
		return vmi
	}
	for _, tc := range []struct {
		name    string
		vm      func(*kubevirtv1.VirtualMachine)
		vmi     *kubevirtv1.VirtualMachineInstance
		state   outcome.State
		reason  string
		message string
	}{
		{name: "applied", vmi: running(func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Status.CurrentCPUTopology.Sockets = 4
			vmi.Status.Memory.GuestRequested = ptr.To(resource.MustParse("8Gi"))
		}), state: outcome.Done, reason: infrav1.InPlaceUpdatedReason},
		{name: "not yet hot-plugged", vmi: running(nil), state: outcome.Waiting, reason: infrav1.InPlaceUpdatingReason,
			message: "waiting for KubeVirt to hot-plug 4 CPU sockets and 8Gi of guest memory"},
		{name: "migrating", vmi: running(func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{TargetNode: "infra-2"}
		}), state: outcome.Waiting, reason: infrav1.InPlaceUpdatingReason,
			message: "KubeVirt hot-plugs 4 CPU sockets and 8Gi of guest memory by a live migration to node infra-2"},
		{name: "the carrying migration failed", vmi: running(func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{Failed: true, FailureReason: "aborted"}
			vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceVCPUChange, Status: corev1.ConditionTrue})
		}), state: outcome.Waiting, reason: infrav1.InPlaceUpdatingReason,
			message: "the live migration carrying 4 CPU sockets and 8Gi of guest memory failed (aborted); KubeVirt tries again"},
		{name: "KubeVirt asks for a restart", vm: func(vm *kubevirtv1.VirtualMachine) {
			vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineRestartRequired,
				Status: corev1.ConditionTrue, Message: "a non-live-updatable field was changed in the template spec"}}
		}, vmi: running(nil), state: outcome.Failed, reason: infrav1.InPlaceUpdateFailedReason,
			message: "KubeVirt cannot apply the change to the running VM and asks for a restart: a non-live-updatable field was changed in the template spec; replace the machine (delete its Machine)"},
		{name: "cannot migrate", vmi: running(func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Status.Conditions[0].Status, vmi.Status.Conditions[0].Message = corev1.ConditionFalse, "bridged"
		}), state: outcome.Failed, reason: infrav1.InPlaceUpdateFailedReason,
			message: "KubeVirt hot-plugs 4 CPU sockets and 8Gi of guest memory only by a live migration, and the VM cannot migrate: bridged; replace the machine (delete its Machine)"},
		{name: "another hot-plug in progress", vm: func(vm *kubevirtv1.VirtualMachine) {
			vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineFailure,
				Status: corev1.ConditionTrue, Reason: "HotPlugCPUError", Message: "another CPU hotplug is in progress"}}
		}, vmi: running(nil), state: outcome.Waiting, reason: infrav1.InPlaceUpdatingReason,
			message: "waiting for KubeVirt to hot-plug 4 CPU sockets and 8Gi of guest memory, which it retries: another CPU hotplug is in progress"},
		{name: "not running", vmi: nil, state: outcome.Waiting, reason: infrav1.InPlaceUpdatingReason,
			message: "waiting for the VM instance to run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			vm := builtVM()
			if tc.vm != nil {
				tc.vm(vm)
			}
			o := Progress(grown(), vm, tc.vmi)
			g.Expect(o.State).To(Equal(tc.state))
			g.Expect(o.Reason).To(Equal(tc.reason))
			if tc.message != "" {
				g.Expect(o.Message).To(Equal(tc.message))
			}
		})
	}
}

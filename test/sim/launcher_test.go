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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestLauncherResources(t *testing.T) {
	vmi := func(mutate func(d *kubevirtv1.DomainSpec)) *kubevirtv1.VirtualMachineInstance {
		guest := resource.MustParse("4Gi")
		v := &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			CPU: &kubevirtv1.CPU{Cores: 2}, Memory: &kubevirtv1.Memory{Guest: &guest}}}}
		if mutate != nil {
			mutate(&v.Spec.Domain)
		}
		return v
	}
	// 4Gi/512 + 2*8Mi + 8Mi + 32Mi + 180Mi = 244Mi of overhead.
	overhead := resource.MustParse("244Mi")
	withOverhead := resource.MustParse("4Gi")
	withOverhead.Add(overhead)
	tests := []struct {
		name       string
		vmi        *kubevirtv1.VirtualMachineInstance
		wantCPU    string
		wantMemory resource.Quantity
		wantLimits bool
		wantPages  string
		guaranteed bool
	}{
		{"shared CPUs", vmi(nil), "200m", withOverhead, false, "", false},
		{"dedicated CPUs", vmi(func(d *kubevirtv1.DomainSpec) { d.CPU.DedicatedCPUPlacement = true }), "2", withOverhead, true, "", true},
		{"isolated emulator thread", vmi(func(d *kubevirtv1.DomainSpec) {
			d.CPU.DedicatedCPUPlacement, d.CPU.IsolateEmulatorThread = true, true
		}), "3", withOverhead, true, "", true},
		{"hugepages", vmi(func(d *kubevirtv1.DomainSpec) { d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "2Mi"} }),
			"200m", overhead, true, "4Gi", false},
		{"dedicated CPUs and hugepages", vmi(func(d *kubevirtv1.DomainSpec) {
			d.CPU.DedicatedCPUPlacement = true
			d.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "2Mi"}
		}), "2", overhead, true, "4Gi", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := launcherResources(tt.vmi)
			if cpu := got.Requests[corev1.ResourceCPU]; cpu.String() != tt.wantCPU {
				t.Errorf("CPU request %s, want %s", cpu.String(), tt.wantCPU)
			}
			if mem := got.Requests[corev1.ResourceMemory]; mem.Cmp(tt.wantMemory) != 0 {
				t.Errorf("memory request %s, want %s", mem.String(), tt.wantMemory.String())
			}
			if (got.Limits != nil) != tt.wantLimits {
				t.Errorf("limits %v, want limits: %t", got.Limits, tt.wantLimits)
			}
			pages := got.Requests[hugepages2Mi]
			if tt.wantPages == "" && !pages.IsZero() || tt.wantPages != "" && pages.Cmp(resource.MustParse(tt.wantPages)) != 0 {
				t.Errorf("hugepages request %s, want %q", pages.String(), tt.wantPages)
			}
			if guaranteed := equalOn(got, corev1.ResourceCPU) && equalOn(got, corev1.ResourceMemory); guaranteed != tt.guaranteed {
				t.Errorf("Guaranteed QoS %t, want %t: %+v", guaranteed, tt.guaranteed, got)
			}
		})
	}
}

// equalOn reports whether a resource is both requested and limited, with
// the same amount, as the Guaranteed QoS class needs.
func equalOn(r corev1.ResourceRequirements, name corev1.ResourceName) bool {
	req, ok1 := r.Requests[name]
	lim, ok2 := r.Limits[name]
	return ok1 && ok2 && req.Cmp(lim) == 0
}

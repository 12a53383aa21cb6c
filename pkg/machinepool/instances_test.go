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

package machinepool

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestRemovalOrder(t *testing.T) {
	inst := func(name string, marked bool) instance {
		i := instance{vm: &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}},
			machine: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		if marked {
			i.machine.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
		}
		return i
	}
	outdatedOnes := func(names ...string) func(instance) bool {
		return func(i instance) bool { return slices.Contains(names, i.vm.Name) }
	}
	for _, tt := range []struct {
		name      string
		instances []instance
		outdated  func(instance) bool
		want      []string
	}{
		{name: "highest index first, by number not text", instances: []instance{inst("p-2", false), inst("p-10", false), inst("p-9", false)},
			outdated: outdatedOnes(), want: []string{"p-10", "p-9", "p-2"}},
		{name: "a Machine marked for deletion goes first", instances: []instance{inst("p-0", true), inst("p-1", false), inst("p-2", false)},
			outdated: outdatedOnes(), want: []string{"p-0", "p-2", "p-1"}},
		{name: "outdated before current", instances: []instance{inst("p-0", false), inst("p-1", false), inst("p-2", false)},
			outdated: outdatedOnes("p-0"), want: []string{"p-0", "p-2", "p-1"}},
		{name: "marked before outdated", instances: []instance{inst("p-0", false), inst("p-1", true), inst("p-2", false)},
			outdated: outdatedOnes("p-2"), want: []string{"p-1", "p-2", "p-0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, i := range removalOrder(tt.instances, tt.outdated) {
				got = append(got, i.vm.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInstanceGoing(t *testing.T) {
	now := metav1.Now()
	vm := func(deleting bool) *kubevirtv1.VirtualMachine {
		v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "p-0"}}
		if deleting {
			v.DeletionTimestamp = &now
		}
		return v
	}
	owned := &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "p-0",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Machine", Name: "p-0", Controller: new(true)}}}}
	for _, tt := range []struct {
		name  string
		i     instance
		going bool
	}{
		{name: "a VM alone is live", i: instance{vm: vm(false)}},
		{name: "a VM being deleted", i: instance{vm: vm(true)}, going: true},
		{name: "a machine whose Machine is gone", i: instance{vm: vm(false), km: owned}, going: true},
		{name: "a machine with its Machine", i: instance{vm: vm(false), km: owned, machine: &clusterv1.Machine{}}},
		{name: "a machine being deleted", i: instance{vm: vm(false), km: &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}}, going: true},
		{name: "a Machine being deleted", i: instance{vm: vm(false), machine: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}}, going: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.i.going(); got != tt.going {
				t.Errorf("going = %v, want %v", got, tt.going)
			}
		})
	}
}

func TestPendingDeletions(t *testing.T) {
	var p pendingDeletions
	pool := types.NamespacedName{Namespace: "ns", Name: "pool"}
	p.add(pool, "machine-a")
	p.add(pool, "vm-b")
	// The cache still shows machine-a standing, vm-b already deleting.
	got := p.settle(pool, map[types.UID]bool{"machine-a": true, "vm-c": true})
	if !got["machine-a"] || got["vm-b"] || got["vm-c"] || len(got) != 1 {
		t.Errorf("pending %v, want only machine-a", got)
	}
	// Once the cache shows machine-a deleting too, nothing is pending.
	if got := p.settle(pool, map[types.UID]bool{"vm-c": true}); len(got) != 0 {
		t.Errorf("pending %v, want none", got)
	}
	p.add(pool, "machine-d")
	p.forget(pool)
	if got := p.settle(pool, map[types.UID]bool{"machine-d": true}); len(got) != 0 {
		t.Errorf("pending %v after forget, want none", got)
	}
}

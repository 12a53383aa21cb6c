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

package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestTimelineJoinsAMachinesObjectsAndMeasuresItsWaits(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := newTimeline()
	tl.start = t0
	tl.clusters["ns/c"] = map[string]time.Time{clusterCreated: at(0), clusterEndpoint: at(1), clusterInitialized: at(20)}
	// The KubeVirt objects are named after the infrastructure machine,
	// which is not the Machine's name.
	tl.machineInfo["ns/cp"] = machineInfo{infra: "ns/cp-infra", cluster: "ns/c", controlPlane: true}
	tl.machineInfo["ns/w1"] = machineInfo{infra: "ns/w1-infra", cluster: "ns/c"}
	tl.machineInfo["ns/w2"] = machineInfo{infra: "ns/w2-infra", cluster: "ns/c"}
	tl.machines["ns/cp"] = map[string]time.Time{machineCreated: at(0), machineBootstrapData: at(2), machineNode: at(15)}
	tl.infra["ns/cp-infra"] = map[string]time.Time{machineVMCreated: at(3), machineVMIReady: at(10)}
	tl.machines["ns/w1"] = map[string]time.Time{machineCreated: at(0), machineBootstrapData: at(30), machineNode: at(40)}
	tl.infra["ns/w1-infra"] = map[string]time.Time{machineVMCreated: at(30.5)}
	// Still waiting for its bootstrap data: no step, and no wait after
	// the control plane.
	tl.machines["ns/w2"] = map[string]time.Time{machineCreated: at(0)}

	got := tl.summary()
	if len(got.Machines) != 3 || got.Machines[0].Name != "ns/cp" || !got.Machines[0].ControlPlane {
		t.Fatalf("machines = %+v", got.Machines)
	}
	if s := got.Machines[0].Seconds[machineVMIReady]; s != 10 {
		t.Errorf("the control plane's VMI ready at %v, want 10 (joined through its infrastructure machine)", s)
	}
	want := map[string]struct {
		count  int
		median float64
		owner  string
	}{
		"control plane: created -> bootstrap data": {1, 2, "Cluster API (kubeadm bootstrap)"},
		"bootstrap data -> VM created":             {2, 0.5, "provider"},
		"VM created -> VMI ready":                  {1, 7, ""},
		"VMI ready -> Node":                        {1, 5, ""},
		"worker: created -> bootstrap data":        {1, 30, "Cluster API (kubeadm bootstrap)"},
		"VM created -> Node":                       {1, 9.5, ""},
		controlPlaneInitAfterNode:                  {1, 5, "Cluster API (control plane, ClusterCache)"},
		workerBootstrapAfterInit:                   {1, 10, "Cluster API (kubeadm bootstrap)"},
	}
	if len(got.Waits) != len(want) {
		t.Errorf("waits = %+v, want %d of them", got.Waits, len(want))
	}
	for _, w := range got.Waits {
		exp, ok := want[w.Name]
		if !ok {
			t.Errorf("unexpected wait %q", w.Name)
			continue
		}
		if w.Count != exp.count || w.MedianSeconds != exp.median || w.Owner != exp.owner {
			t.Errorf("wait %q = %d, median %v, owner %q; want %d, %v, %q", w.Name, w.Count, w.MedianSeconds, w.Owner, exp.count, exp.median, exp.owner)
		}
	}
	// The cluster-level waits come last, after every machine step.
	if n := len(got.Waits); n < 2 || got.Waits[n-2].Name != controlPlaneInitAfterNode || got.Waits[n-1].Name != workerBootstrapAfterInit {
		t.Errorf("waits are not in a machine's order: %+v", got.Waits)
	}
}

func TestTimelineNotesEachMilestoneOnceFromTheObjects(t *testing.T) {
	tl := newTimeline()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Labels: map[string]string{}},
		Spec: clusterv1.MachineSpec{ClusterName: "c", InfrastructureRef: clusterv1.ContractVersionedObjectReference{Name: "w-infra"}}}
	tl.onMachine(m)
	first := tl.machines["ns/w"][machineCreated]
	m.Spec.Bootstrap.DataSecretName = ptr.To("w-data")
	tl.onMachine(m)
	if _, ok := tl.machines["ns/w"][machineBootstrapData]; !ok {
		t.Errorf("bootstrap data not noted: %v", tl.machines["ns/w"])
	}
	if tl.machines["ns/w"][machineCreated] != first {
		t.Errorf("an update moved the creation time")
	}
	if info := tl.machineInfo["ns/w"]; info.infra != "ns/w-infra" || info.cluster != "ns/c" || info.controlPlane {
		t.Errorf("machine info = %+v", info)
	}

	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-infra"}}
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	tl.onVMI(vmi)
	if _, ok := tl.infra["ns/w-infra"][machineVMIReady]; ok {
		t.Errorf("a Ready VMI without an address counted as ready")
	}
	if _, ok := tl.infra["ns/w-infra"][machineVMIRunning]; !ok {
		t.Errorf("a Running VMI not noted")
	}
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.5"}}
	tl.onVMI(vmi)
	if _, ok := tl.infra["ns/w-infra"][machineVMIReady]; !ok {
		t.Errorf("a Ready VMI with an address not noted")
	}
}

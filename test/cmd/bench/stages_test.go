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
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestStagesFollowEachDiskThroughCDIsPhases(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sc := &stageClock{
		disks: map[string]map[string]time.Time{
			"ns/a-rootdisk": {"CloneScheduled": at(0), "CloneInProgress": at(2), "RebindInProgress": at(5), "Succeeded": at(6)},
			"ns/b-rootdisk": {"CloneScheduled": at(0), "CloneInProgress": at(4), "RebindInProgress": at(6), "Succeeded": at(7)},
			// Still copying: its last phase has no end yet.
			"ns/c-rootdisk": {"CloneScheduled": at(1), "CloneInProgress": at(3)},
		},
		running: map[string]time.Time{"ns/a": at(8), "ns/b": at(7.5)},
	}
	want := []Stage{
		{Name: "CloneScheduled", Count: 3, MedianSeconds: 2, P90Seconds: 4, MaxSeconds: 4},
		{Name: "CloneInProgress", Count: 2, MedianSeconds: 2, P90Seconds: 3, MaxSeconds: 3},
		{Name: "RebindInProgress", Count: 2, MedianSeconds: 1, P90Seconds: 1, MaxSeconds: 1},
		{Name: vmRunning, Count: 2, MedianSeconds: 0.5, P90Seconds: 2, MaxSeconds: 2},
	}
	if got := sc.stages(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("stages:\n got %+v\nwant %+v", got, want)
	}
}

func TestQuantileIsTheNearestRank(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0.5: 5, 0.9: 9, 1: 10, 0: 1} {
		if got := quantile(ds, q); got != want {
			t.Errorf("quantile %.1f = %d, want %d", q, got, want)
		}
	}
}

func TestOnStorageClassSetsOnlyMachineTemplates(t *testing.T) {
	template := &unstructured.Unstructured{Object: map[string]any{"kind": "KubevirtMachineTemplate",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"rootDisk": map[string]any{"diskSize": "20Gi"}}}}}}
	cluster := &unstructured.Unstructured{Object: map[string]any{"kind": "KubevirtCluster", "spec": map[string]any{}}}
	for _, u := range []*unstructured.Unstructured{template, cluster} {
		if err := onStorageClass("csi-clone")(u); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _ := unstructured.NestedString(template.Object, "spec", "template", "spec", "rootDisk", "storageClassName"); got != "csi-clone" {
		t.Errorf("root disk storage class %q, want csi-clone", got)
	}
	if size, _, _ := unstructured.NestedString(template.Object, "spec", "template", "spec", "rootDisk", "diskSize"); size != "20Gi" {
		t.Errorf("disk size %q changed", size)
	}
	if !reflect.DeepEqual(cluster.Object, map[string]any{"kind": "KubevirtCluster", "spec": map[string]any{}}) {
		t.Errorf("the KubevirtCluster changed: %v", cluster.Object)
	}
}

func TestUntilVMStagesByRole(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	machine := func(name string, created time.Duration, cp bool) infrav1.KubevirtMachine {
		km := infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))}}
		if cp {
			km.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""}
		}
		return km
	}
	vm := func(ns, name string, created time.Duration) kubevirtv1.VirtualMachine {
		return kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))}}
	}
	got := untilVMStages(
		[]infrav1.KubevirtMachine{machine("cp", 0, true), machine("w1", 0, false), machine("w2", 5*time.Second, false), machine("waiting", 0, false)},
		[]kubevirtv1.VirtualMachine{vm("ns", "cp", 2*time.Second), vm("ns", "w1", 40*time.Second), vm("ns", "w2", 40*time.Second), vm("other", "waiting", time.Second)})
	want := map[string][]time.Duration{
		untilVMControlPlane: {2 * time.Second},
		untilVMWorker:       {40 * time.Second, 35 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("untilVMStages = %v, want %v (a machine without its VM is left out)", got, want)
	}
	if stageRank(untilVMControlPlane) >= stageRank(untilVMWorker) || stageRank(untilVMWorker) >= stageRank("CloneScheduled") {
		t.Errorf("the waits for the VMs come first, the control plane's before the workers'")
	}
}

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
)

func TestRequestsAreToldApartByWhatTheyAreAbout(t *testing.T) {
	t0 := time.Now()
	machines := map[string]bool{"ns/c-md-abc": true, "ns/c-cp-x": true}
	reqs := []request{
		{verb: "patch", resource: "kubevirtmachines", namespace: "ns", name: "c-md-abc", received: t0},
		{verb: "create", resource: "virtualmachines", namespace: "ns", name: "c-md-abc", received: t0},
		{verb: "create", resource: "secrets", namespace: "ns", name: "c-md-abc-userdata", received: t0},
		{verb: "patch", resource: "kubevirtmachines/status", namespace: "ns", name: "c-cp-x", received: t0},
		// A machine of the same name in another namespace is not this one.
		{verb: "create", resource: "secrets", namespace: "other", name: "c-md-abc-userdata", received: t0},
		// A cluster's objects and golden volumes.
		{verb: "create", resource: "services", namespace: "ns", name: "c-lb", received: t0},
		{verb: "create", resource: "datavolumes", namespace: "ns", name: "golden-abc", received: t0},
		{verb: "create", resource: "events", namespace: "ns", name: "c-md-abc.1234", received: t0},
		{verb: "get", resource: "virtualmachines", namespace: "ns", name: "c-md-abc", received: t0},
		// At rest.
		{verb: "watch", resource: "virtualmachines", received: t0.Add(time.Minute)},
		{verb: "patch", resource: "kubevirtmachines/status", namespace: "ns", name: "c-cp-x", received: t0.Add(time.Minute)},
	}
	r := Result{Machines: 2}
	r.setRequests(reqs, machines, t0.Add(time.Second), 5*time.Minute)
	if r.Writes.MachinePerMachine != 2 || r.Writes.ClusterPerMachine != 1.5 || r.Writes.EventsPerMachine != 0.5 {
		t.Errorf("writes = %+v; want 2 machine-scoped, 1.5 other, 0.5 Events per machine, the ones at rest left out", r.Writes)
	}
	if r.Writes.ByRequest["patch kubevirtmachines/status"] != 1 || r.Writes.ByRequest["create secrets"] != 2 {
		t.Errorf("by request = %v", r.Writes.ByRequest)
	}
	if r.RequestsTotal != len(reqs)-2 || r.RequestsPerMachine["get"] != 0.5 || r.RequestsPerMachine["watch"] != 0 {
		t.Errorf("total %d, per machine %v", r.RequestsTotal, r.RequestsPerMachine)
	}
	if r.AtRest == nil || r.AtRest.Writes != 1 || r.AtRest.ReadsPerMachine != 0.5 || r.AtRest.ByVerb["watch"] != 1 || r.AtRest.Seconds != 300 {
		t.Errorf("at rest = %+v; want 1 write, 0.5 reads per machine", r.AtRest)
	}

	r = Result{Machines: 2}
	r.setRequests(reqs, machines, time.Time{}, 0)
	if r.AtRest != nil || r.RequestsTotal != len(reqs) || r.Writes.MachinePerMachine != 2.5 {
		t.Errorf("without a window: at rest %+v, %d requests, %v machine writes per machine; want none, all, 2.5", r.AtRest, r.RequestsTotal, r.Writes.MachinePerMachine)
	}
}

func TestTheKubeVirtFloorIsTheHeadline(t *testing.T) {
	r := Result{SecondsToProvisioned: 110, FloorSecondsToProvisioned: 40, KubeVirtFloorSecondsToProvisioned: 100}
	r.setRatios()
	if r.RatioToKubeVirtFloorProvisioned != 1.1 || r.RatioToFloorProvisioned != 2.75 {
		t.Errorf("ratios = %v to the KubeVirt floor, %v to Cluster API's; want 1.1, 2.75", r.RatioToKubeVirtFloorProvisioned, r.RatioToFloorProvisioned)
	}
	got := withFloors(r.SecondsToProvisioned, r.KubeVirtFloorSecondsToProvisioned, r.RatioToKubeVirtFloorProvisioned, r.FloorSecondsToProvisioned, r.RatioToFloorProvisioned)
	if want := "110.0 (1.10x the KubeVirt floor 100.0; 2.75x the Cluster API floor 40.0)"; got != want {
		t.Errorf("withFloors = %q, want %q", got, want)
	}
	if got := withFloors(5, 0, 0, 0, 0); got != "5.0" {
		t.Errorf("without floors: %q", got)
	}
}

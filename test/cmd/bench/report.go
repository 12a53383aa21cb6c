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
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// Result is what one run measured; it is written as JSON. docs/benchmark.md
// says how each number is taken.
type Result struct {
	// Provider is the command line of the measured provider.
	Provider string `json:"provider"`
	// CAPIProductionDefaults says Cluster API ran with its release's
	// ClusterCache retry (30 s) rather than the world's (2 s).
	CAPIProductionDefaults bool `json:"capiProductionDefaults"`
	// Variables are the template variables set with --var in every phase.
	Variables map[string]string `json:"variables,omitempty"`
	// Machines and Clusters are what was provisioned.
	Machines int `json:"machines"`
	Clusters int `json:"clusters"`
	// SecondsToProvisioned is when every Machine's infrastructure was
	// provisioned, SecondsToNodeRefs when every Machine also had a Node.
	SecondsToProvisioned float64 `json:"secondsToProvisioned"`
	SecondsToNodeRefs    float64 `json:"secondsToNodeRefs"`
	// FloorSecondsToProvisioned and FloorSecondsToNodeRefs are the same
	// times with the world's instant test provider in place of the
	// measured one (zero with --floor=false).
	FloorSecondsToProvisioned float64 `json:"floorSecondsToProvisioned,omitempty"`
	FloorSecondsToNodeRefs    float64 `json:"floorSecondsToNodeRefs,omitempty"`
	// RatioToFloorProvisioned and RatioToFloorNodeRefs are the provider's
	// seconds divided by the floor's: the comparable number, since the
	// seconds alone depend on the machine.
	RatioToFloorProvisioned float64 `json:"ratioToFloorProvisioned,omitempty"`
	RatioToFloorNodeRefs    float64 `json:"ratioToFloorNodeRefs,omitempty"`
	// KubeVirtFloorSecondsToProvisioned and KubeVirtFloorSecondsToNodeRefs
	// are the same times with the oracle, which does only what any
	// KubeVirt provider must; the ratios to them are the headline.
	KubeVirtFloorSecondsToProvisioned float64 `json:"kubevirtFloorSecondsToProvisioned,omitempty"`
	KubeVirtFloorSecondsToNodeRefs    float64 `json:"kubevirtFloorSecondsToNodeRefs,omitempty"`
	RatioToKubeVirtFloorProvisioned   float64 `json:"ratioToKubevirtFloorProvisioned,omitempty"`
	RatioToKubeVirtFloorNodeRefs      float64 `json:"ratioToKubevirtFloorNodeRefs,omitempty"`
	// RequestsPerMachine are the provider's requests to the management and
	// infra API servers per machine, by verb.
	RequestsPerMachine map[string]float64 `json:"requestsPerMachine"`
	// RequestsByResource are the provider's requests by resource.
	RequestsByResource map[string]int `json:"requestsByResource"`
	// RequestsTotal is every request of the provider.
	RequestsTotal int `json:"requestsTotal"`
	// Writes are the provider's successful creates, updates, patches and
	// deletes, per machine, by what they are about.
	Writes Writes `json:"writes"`
	// AtRest is what the provider asked in the window after every Machine
	// had its Node, when nothing changes; absent without --rest.
	AtRest *AtRest `json:"atRest,omitempty"`
	// ProviderCPUSeconds and ProviderPeakMemoryMiB are the provider
	// process's user and system time and its peak resident memory.
	ProviderCPUSeconds    float64 `json:"providerCPUSeconds"`
	ProviderPeakMemoryMiB float64 `json:"providerPeakMemoryMiB"`
	// CPUByProcess and KubeVirtFloorCPUByProcess are the CPU seconds each
	// process of the world spent in the provider's phase and the KubeVirt
	// floor's, by command name ("bench" is Cluster API, the simulator and
	// the oracle), to tell which component a phase's extra time went to.
	CPUByProcess              map[string]float64 `json:"cpuByProcess,omitempty"`
	KubeVirtFloorCPUByProcess map[string]float64 `json:"kubevirtFloorCPUByProcess,omitempty"`
	// Imports and Clones are CDI's golden image downloads and
	// root disk clones.
	Imports int64 `json:"imports"`
	Clones  int64 `json:"clones"`
	// CloneMethods count the root disks by the clone method CDI used.
	CloneMethods map[string]int `json:"cloneMethods"`
	// Stages are the root disks' times in each of CDI's phases, and from
	// a disk's completion to its VM running.
	Stages []Stage `json:"stages"`
	// Timeline is when each cluster and machine reached each milestone,
	// and the waits between them; FloorTimeline the same for the floor.
	Timeline              Timeline  `json:"timeline"`
	FloorTimeline         *Timeline `json:"floorTimeline,omitempty"`
	KubeVirtFloorTimeline *Timeline `json:"kubevirtFloorTimeline,omitempty"`
	// Date is when the run started, in UTC.
	Date string `json:"date"`
}

// Writes are writes per machine, told apart by what they are about: a
// machine's own objects (its KubevirtMachine, its VM, its user data
// Secret, named after the machine), Events, and everything else (golden
// volumes, a cluster's objects). ByRequest counts every write as
// "verb resource", over all machines.
type Writes struct {
	MachinePerMachine float64        `json:"machinePerMachine"`
	ClusterPerMachine float64        `json:"clusterPerMachine"`
	EventsPerMachine  float64        `json:"eventsPerMachine"`
	ByRequest         map[string]int `json:"byRequest"`
}

// AtRest is the provider's requests in the window at rest.
type AtRest struct {
	Seconds float64        `json:"seconds"`
	ByVerb  map[string]int `json:"byVerb"`
	// Writes is every write in the window; ReadsPerMachine the gets,
	// lists and watches, per machine.
	Writes          int     `json:"writes"`
	ReadsPerMachine float64 `json:"readsPerMachine"`
}

// setRequests counts the successful requests. machines are the
// infrastructure machines (namespace/name); a request received at or
// after restFrom, when it is set, counts at rest instead.
func (r *Result) setRequests(reqs []request, machines map[string]bool, restFrom time.Time, rest time.Duration) {
	r.RequestsTotal, r.RequestsByResource = 0, map[string]int{}
	r.RequestsPerMachine = map[string]float64{}
	r.Writes = Writes{ByRequest: map[string]int{}}
	perMachine := 1 / float64(r.Machines)
	if !restFrom.IsZero() {
		r.AtRest = &AtRest{Seconds: rest.Seconds(), ByVerb: map[string]int{}}
	}
	for _, q := range reqs {
		if r.AtRest != nil && !q.received.Before(restFrom) {
			// Counted at rest only, so that the provisioning figures
			// mean the same with and without the window.
			r.AtRest.ByVerb[q.verb]++
			if writeVerbs[q.verb] {
				r.AtRest.Writes++
			} else {
				r.AtRest.ReadsPerMachine += perMachine
			}
			continue
		}
		r.RequestsTotal++
		r.RequestsPerMachine[q.verb] += perMachine
		r.RequestsByResource[q.resource]++
		if !writeVerbs[q.verb] {
			continue
		}
		r.Writes.ByRequest[q.verb+" "+q.resource]++
		switch {
		case q.resource == "events":
			r.Writes.EventsPerMachine += perMachine
		case machineScoped(q, machines):
			r.Writes.MachinePerMachine += perMachine
		default:
			r.Writes.ClusterPerMachine += perMachine
		}
	}
}

// machineScoped says a request is about one machine's objects: the
// infrastructure machine itself, or an object named after it in its
// namespace (its VM shares the name; its user data Secret and root disk
// add a suffix).
func machineScoped(q request, machines map[string]bool) bool {
	if machines[q.namespace+"/"+q.name] {
		return true
	}
	for i := len(q.name) - 1; i > 0; i-- {
		if q.name[i] == '-' && machines[q.namespace+"/"+q.name[:i]] {
			return true
		}
	}
	return false
}

// writeVerbs are the audit log's verbs that change something.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// setRatios divides the provider's seconds by the floor's, when the floor
// was measured.
func (r *Result) setRatios() {
	if r.FloorSecondsToProvisioned > 0 {
		r.RatioToFloorProvisioned = r.SecondsToProvisioned / r.FloorSecondsToProvisioned
	}
	if r.FloorSecondsToNodeRefs > 0 {
		r.RatioToFloorNodeRefs = r.SecondsToNodeRefs / r.FloorSecondsToNodeRefs
	}
	if r.KubeVirtFloorSecondsToProvisioned > 0 {
		r.RatioToKubeVirtFloorProvisioned = r.SecondsToProvisioned / r.KubeVirtFloorSecondsToProvisioned
	}
	if r.KubeVirtFloorSecondsToNodeRefs > 0 {
		r.RatioToKubeVirtFloorNodeRefs = r.SecondsToNodeRefs / r.KubeVirtFloorSecondsToNodeRefs
	}
}

func (r *Result) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

func printTable(r Result) {
	row := func(name, format string, args ...any) {
		fmt.Printf("%-44s "+format+"\n", append([]any{name}, args...)...)
	}
	fmt.Println()
	row("provider", "%s", r.Provider)
	row("machines", "%d in %d clusters", r.Machines, r.Clusters)
	capi := "the world's: a 2 s ClusterCache retry"
	if r.CAPIProductionDefaults {
		capi = "production defaults: a 30 s ClusterCache retry"
	}
	row("Cluster API", "%s", capi)
	row("seconds until all provisioned", "%s", withFloors(r.SecondsToProvisioned, r.KubeVirtFloorSecondsToProvisioned, r.RatioToKubeVirtFloorProvisioned,
		r.FloorSecondsToProvisioned, r.RatioToFloorProvisioned))
	row("seconds until all Machines have a Node", "%s", withFloors(r.SecondsToNodeRefs, r.KubeVirtFloorSecondsToNodeRefs, r.RatioToKubeVirtFloorNodeRefs,
		r.FloorSecondsToNodeRefs, r.RatioToFloorNodeRefs))
	for _, verb := range slices.Sorted(maps.Keys(r.RequestsPerMachine)) {
		row("API requests per machine: "+verb, "%.2f", r.RequestsPerMachine[verb])
	}
	row("API requests per machine: all", "%.2f", float64(r.RequestsTotal)/float64(r.Machines))
	row("writes per machine: the machine's objects", "%.2f", r.Writes.MachinePerMachine)
	row("writes per machine: cluster and golden image", "%.2f", r.Writes.ClusterPerMachine)
	row("writes per machine: Events", "%.2f", r.Writes.EventsPerMachine)
	for _, w := range slices.Sorted(maps.Keys(r.Writes.ByRequest)) {
		row("  "+w, "%d", r.Writes.ByRequest[w])
	}
	if r.AtRest != nil {
		row(fmt.Sprintf("at rest for %.0fs: writes", r.AtRest.Seconds), "%d", r.AtRest.Writes)
		row(fmt.Sprintf("at rest for %.0fs: reads per machine", r.AtRest.Seconds), "%.2f", r.AtRest.ReadsPerMachine)
		for _, verb := range slices.Sorted(maps.Keys(r.AtRest.ByVerb)) {
			row("  at rest: "+verb, "%d", r.AtRest.ByVerb[verb])
		}
	}
	row("provider CPU seconds", "%.1f", r.ProviderCPUSeconds)
	row("provider peak memory (MiB)", "%.0f", r.ProviderPeakMemoryMiB)
	for _, name := range slices.Sorted(maps.Keys(r.CPUByProcess)) {
		if floor, ok := r.KubeVirtFloorCPUByProcess[name]; ok {
			row("CPU seconds: "+name, "%.1f (KubeVirt floor %.1f)", r.CPUByProcess[name], floor)
		} else {
			row("CPU seconds: "+name, "%.1f", r.CPUByProcess[name])
		}
	}
	row("CDI imports / clones", "%d / %d", r.Imports, r.Clones)
	for _, method := range slices.Sorted(maps.Keys(r.CloneMethods)) {
		row("root disks cloned by "+method, "%d", r.CloneMethods[method])
	}
	for _, st := range r.Stages {
		row("root disk stage: "+st.Name, "median %.1fs, p90 %.1fs, max %.1fs (%d disks)", st.MedianSeconds, st.P90Seconds, st.MaxSeconds, st.Count)
	}
}

// withFloors prints seconds, and beside them each floor that was
// measured with the ratio to it: the KubeVirt floor first, the headline,
// then the Cluster API floor as context.
func withFloors(seconds, kubevirtFloor, kubevirtRatio, capiFloor, capiRatio float64) string {
	out := fmt.Sprintf("%.1f", seconds)
	var floors []string
	if kubevirtFloor > 0 {
		floors = append(floors, fmt.Sprintf("%.2fx the KubeVirt floor %.1f", kubevirtRatio, kubevirtFloor))
	}
	if capiFloor > 0 {
		floors = append(floors, fmt.Sprintf("%.2fx the Cluster API floor %.1f", capiRatio, capiFloor))
	}
	if len(floors) > 0 {
		out += " (" + strings.Join(floors, "; ") + ")"
	}
	return out
}

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
)

// Result is what one run measured; it is written as JSON. docs/benchmark.md
// says how each number is taken.
type Result struct {
	// Provider is the command line of the measured provider.
	Provider string `json:"provider"`
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
	// RequestsPerMachine are the provider's requests to the management and
	// infra API servers per machine, by verb.
	RequestsPerMachine map[string]float64 `json:"requestsPerMachine"`
	// RequestsByResource are the provider's requests by resource.
	RequestsByResource map[string]int `json:"requestsByResource"`
	// RequestsTotal is every request of the provider.
	RequestsTotal int `json:"requestsTotal"`
	// WriteRequestsPerMachine are the provider's creates, updates, patches
	// and deletes of every resource, Events included, per machine.
	WriteRequestsPerMachine float64 `json:"writeRequestsPerMachine"`
	// ProviderCPUSeconds and ProviderPeakMemoryMiB are the provider
	// process's user and system time and its peak resident memory.
	ProviderCPUSeconds    float64 `json:"providerCPUSeconds"`
	ProviderPeakMemoryMiB float64 `json:"providerPeakMemoryMiB"`
	// Imports and Clones are CDI's golden image downloads and
	// root disk clones.
	Imports int64 `json:"imports"`
	Clones  int64 `json:"clones"`
	// CloneMethods count the root disks by the clone method CDI used.
	CloneMethods map[string]int `json:"cloneMethods"`
	// Stages are the root disks' times in each of CDI's phases, and from
	// a disk's completion to its VM running.
	Stages []Stage `json:"stages"`
	// Date is when the run started, in UTC.
	Date string `json:"date"`
}

func (r *Result) setRequests(c requestCounts) {
	r.RequestsTotal, r.RequestsByResource = c.total, c.byResource
	r.RequestsPerMachine = map[string]float64{}
	writes := 0
	for verb, n := range c.byVerb {
		r.RequestsPerMachine[verb] = float64(n) / float64(r.Machines)
		if writeVerbs[verb] {
			writes += n
		}
	}
	r.WriteRequestsPerMachine = float64(writes) / float64(r.Machines)
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
	row("seconds until all provisioned", "%s", withFloor(r.SecondsToProvisioned, r.FloorSecondsToProvisioned, r.RatioToFloorProvisioned))
	row("seconds until all Machines have a Node", "%s", withFloor(r.SecondsToNodeRefs, r.FloorSecondsToNodeRefs, r.RatioToFloorNodeRefs))
	for _, verb := range slices.Sorted(maps.Keys(r.RequestsPerMachine)) {
		row("API requests per machine: "+verb, "%.2f", r.RequestsPerMachine[verb])
	}
	row("API requests per machine: all", "%.2f", float64(r.RequestsTotal)/float64(r.Machines))
	row("write requests per machine", "%.2f", r.WriteRequestsPerMachine)
	row("provider CPU seconds", "%.1f", r.ProviderCPUSeconds)
	row("provider peak memory (MiB)", "%.0f", r.ProviderPeakMemoryMiB)
	row("CDI imports / clones", "%d / %d", r.Imports, r.Clones)
	for _, method := range slices.Sorted(maps.Keys(r.CloneMethods)) {
		row("root disks cloned by "+method, "%d", r.CloneMethods[method])
	}
	for _, st := range r.Stages {
		row("root disk stage: "+st.Name, "median %.1fs, p90 %.1fs, max %.1fs (%d disks)", st.MedianSeconds, st.P90Seconds, st.MaxSeconds, st.Count)
	}
}

// withFloor prints seconds, and beside them the floor's and the ratio when
// the floor was measured.
func withFloor(seconds, floor, ratio float64) string {
	if floor == 0 {
		return fmt.Sprintf("%.1f", seconds)
	}
	return fmt.Sprintf("%.1f (floor %.1f, %.2fx)", seconds, floor, ratio)
}

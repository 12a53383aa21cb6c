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
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Timeline is what the timeline saw, in seconds from the first cluster's
// creation (docs/benchmark.md#the-timeline).
type Timeline struct {
	Clusters []ClusterTimeline `json:"clusters"`
	Machines []MachineTimeline `json:"machines"`
	// Waits are the steps between consecutive milestones of a machine,
	// and the two steps between a cluster's control plane and its workers,
	// over the machines that reached both ends.
	Waits []Wait `json:"waits"`
}

// ClusterTimeline is when a cluster reached each of its milestones.
type ClusterTimeline struct {
	Name    string             `json:"name"`
	Seconds map[string]float64 `json:"seconds"`
}

// MachineTimeline is when a Machine, its infrastructure machine and its
// VM reached each milestone.
type MachineTimeline struct {
	Name         string             `json:"name"`
	Cluster      string             `json:"cluster"`
	ControlPlane bool               `json:"controlPlane"`
	Seconds      map[string]float64 `json:"seconds"`
}

// Wait is one step over many machines, with whose wait it is.
type Wait struct {
	Stage
	Owner string `json:"owner,omitempty"`
}

// summary turns what the timeline saw into seconds from its start.
func (tl *timeline) summary() Timeline {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	start := tl.start
	since := func(at map[string]time.Time) map[string]float64 {
		out := map[string]float64{}
		for m, t := range at {
			out[m] = math.Round(t.Sub(start).Seconds()*1000) / 1000
		}
		return out
	}
	var out Timeline
	for _, k := range slices.Sorted(maps.Keys(tl.clusters)) {
		out.Clusters = append(out.Clusters, ClusterTimeline{Name: k, Seconds: since(tl.clusters[k])})
	}
	for _, k := range slices.Sorted(maps.Keys(tl.machineInfo)) {
		info := tl.machineInfo[k]
		at := maps.Clone(tl.machines[k])
		maps.Copy(at, tl.infra[info.infra])
		out.Machines = append(out.Machines, MachineTimeline{Name: k, Cluster: info.cluster, ControlPlane: info.controlPlane, Seconds: since(at)})
	}
	out.Waits = waits(out)
	return out
}

// waits measures each step between a machine's consecutive milestones
// that it reached (a milestone another provider has no object for is
// skipped, and the step is named by its two ends), the control plane's
// Node to its cluster's initialization, and that to each worker's
// bootstrap data.
func waits(tl Timeline) []Wait {
	byName := map[string][]time.Duration{}
	initialized := map[string]float64{}
	for _, c := range tl.Clusters {
		if s, ok := c.Seconds[clusterInitialized]; ok {
			initialized[c.Name] = s
		}
	}
	add := func(name string, from, to float64) {
		byName[name] = append(byName[name], max(0, time.Duration((to-from)*float64(time.Second))))
	}
	for _, m := range tl.Machines {
		prev := ""
		for _, ms := range machineMilestones {
			at, ok := m.Seconds[ms]
			if !ok {
				continue
			}
			if prev != "" {
				add(stepName(prev, ms, m.ControlPlane), m.Seconds[prev], at)
			}
			prev = ms
		}
		init, ok := initialized[m.Cluster]
		switch {
		case !ok:
		case m.ControlPlane:
			if node, ok := m.Seconds[machineNode]; ok {
				add(controlPlaneInitAfterNode, node, init)
			}
		default:
			if data, ok := m.Seconds[machineBootstrapData]; ok {
				add(workerBootstrapAfterInit, init, data)
			}
		}
	}
	var out []Wait
	for _, st := range summarize(byName) {
		out = append(out, Wait{Stage: st, Owner: ownerOf(st.Name)})
	}
	slices.SortStableFunc(out, func(a, b Wait) int { return waitRank(a.Name) - waitRank(b.Name) })
	return out
}

// stepName names the step from one milestone to the next; the wait for
// bootstrap data is told apart by role, as a worker's waits for its
// control plane.
func stepName(from, to string, controlPlane bool) string {
	name := from + " -> " + to
	if to == machineBootstrapData {
		if controlPlane {
			return "control plane: " + name
		}
		return "worker: " + name
	}
	return name
}

// ownerOf is whose wait a step is, when the step is between milestones
// that follow each other.
func ownerOf(step string) string {
	switch step {
	case workerBootstrapAfterInit:
		return "Cluster API (kubeadm bootstrap)"
	case controlPlaneInitAfterNode:
		return "Cluster API (control plane, ClusterCache)"
	}
	step = strings.TrimPrefix(strings.TrimPrefix(step, "worker: "), "control plane: ")
	from, to, _ := strings.Cut(step, " -> ")
	if i := slices.Index(machineMilestones, to); i > 0 && machineMilestones[i-1] == from {
		return waitOwners[to]
	}
	return ""
}

// waitRank orders steps as a machine goes through them.
func waitRank(step string) int {
	switch step {
	case controlPlaneInitAfterNode:
		return 3*len(machineMilestones) + 1
	case workerBootstrapAfterInit:
		return 3*len(machineMilestones) + 2
	}
	step = strings.TrimPrefix(strings.TrimPrefix(step, "worker: "), "control plane: ")
	from, to, _ := strings.Cut(step, " -> ")
	return 2*slices.Index(machineMilestones, to) + slices.Index(machineMilestones, from)
}

// printTimeline prints a line per cluster and one per step.
func printTimeline(tl Timeline) {
	workers := map[string][]MachineTimeline{}
	controlPlanes := map[string][]MachineTimeline{}
	for _, m := range tl.Machines {
		if m.ControlPlane {
			controlPlanes[m.Cluster] = append(controlPlanes[m.Cluster], m)
		} else {
			workers[m.Cluster] = append(workers[m.Cluster], m)
		}
	}
	fmt.Println()
	for _, c := range tl.Clusters {
		fmt.Printf("cluster %s: endpoint %s, control plane initialized %s\n", c.Name,
			seconds(c.Seconds, clusterEndpoint), seconds(c.Seconds, clusterInitialized))
		fmt.Printf("  control plane (%d): %s\n", len(controlPlanes[c.Name]), spans(controlPlanes[c.Name]))
		fmt.Printf("  workers (%d):       %s\n", len(workers[c.Name]), spans(workers[c.Name]))
	}
	for _, w := range tl.Waits {
		owner := ""
		if w.Owner != "" {
			owner = " [" + w.Owner + "]"
		}
		fmt.Printf("%-44s median %.1fs, p90 %.1fs, max %.1fs (%d)%s\n", "wait: "+w.Name, w.MedianSeconds, w.P90Seconds, w.MaxSeconds, w.Count, owner)
	}
}

func seconds(at map[string]float64, milestone string) string {
	if s, ok := at[milestone]; ok {
		return fmt.Sprintf("%.1fs", s)
	}
	return "never"
}

// spans gives, for each milestone after creation, the first and last
// time a machine of ms reached it.
func spans(ms []MachineTimeline) string {
	var parts []string
	for _, milestone := range machineMilestones[1:] {
		first, last, n := math.Inf(1), math.Inf(-1), 0
		for _, m := range ms {
			if s, ok := m.Seconds[milestone]; ok {
				first, last, n = min(first, s), max(last, s), n+1
			}
		}
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%s %.1f", milestone, first)
		if last > first {
			part += fmt.Sprintf("-%.1f", last)
		}
		if n < len(ms) {
			part += fmt.Sprintf(" (%d)", n)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

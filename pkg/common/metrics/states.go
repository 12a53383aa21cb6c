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

package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// StateGauge counts objects by a few labels. Controllers set each object's
// labels as they reconcile it and forget it once it is gone; a scrape sums
// them. The object itself is never a label.
type StateGauge struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	objects map[string][]string
}

func newStateGauge(name, help string, labels ...string) *StateGauge {
	return &StateGauge{desc: prometheus.NewDesc(name, help, labels, nil), objects: map[string][]string{}}
}

// Set records the label values of the object named key, replacing earlier
// ones.
func (g *StateGauge) Set(key string, values ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.objects[key] = values
}

// Forget drops the object named key.
func (g *StateGauge) Forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.objects, key)
}

// Describe implements prometheus.Collector.
func (g *StateGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector: one sample per set of label
// values in use.
func (g *StateGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	counts := map[string]float64{}
	for _, values := range g.objects {
		counts[strings.Join(values, "\x00")]++
	}
	g.mu.Unlock()
	for joined, n := range counts {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, n, strings.Split(joined, "\x00")...)
	}
}

var (
	// Machines counts KubevirtMachines by phase and by the reason of their
	// Ready condition's underlying step.
	Machines = newStateGauge("capkv_machines",
		"KubevirtMachines by phase (provisioning, provisioned, failed, deleting) and the reason of their VirtualMachineReady condition.",
		PhaseLabel, ReasonLabel)
	// InfraClusterUsers counts the objects using each infra cluster, by
	// the reason of their InfraClusterAvailable condition.
	InfraClusterUsers = newStateGauge("capkv_infra_cluster_users",
		"Objects (KubevirtClusters, KubevirtMachines, templates, golden volumes) using an infra cluster, by the reason of its availability as they last saw it: Available, InfraClusterUnreachable, InfraClusterSecretInvalid, KubeVirtNotInstalled, CDINotInstalled.",
		InfraClusterLabel, ReasonLabel)
	// GoldenImageVolumes counts the golden volumes by state: importing,
	// import retried or failed, used or not.
	GoldenImageVolumes = newStateGauge("capkv_golden_image_volumes",
		"Golden image volumes on the infra clusters: importing, import_retrying (CDI restarts a failed importer), import_failed, in_use by a machine or template, or unused and waiting for their retention to end.",
		StateLabel)
)

// StageAges reports, per provisioning stage, how long the machine that has
// been in it longest has been there; set by the machine service.
type StageAges struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	source func() map[string]float64
}

// SetSource replaces where the ages come from; the last manager set up in
// a process wins.
func (a *StageAges) SetSource(source func() map[string]float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.source = source
}

// Describe implements prometheus.Collector.
func (a *StageAges) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

// Collect implements prometheus.Collector.
func (a *StageAges) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	source := a.source
	a.mu.Unlock()
	if source == nil {
		return
	}
	for stage, seconds := range source() {
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, seconds, stage)
	}
}

// OldestInStage is the longest any provisioning machine has been in each
// stage: what the stuck-machine alert watches.
var OldestInStage = &StageAges{desc: prometheus.NewDesc("capkv_machine_stage_oldest_seconds",
	"Seconds the provisioning machine that has been longest in a stage has been there (a stage seen by a restarted provider counts from the restart); absent for a stage no machine is in.",
	[]string{StageLabel}, nil)}

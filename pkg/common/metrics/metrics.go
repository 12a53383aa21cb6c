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

// Package metrics holds the provider's own Prometheus metrics, served on
// the manager's metrics endpoint next to controller-runtime's. None has a
// label per machine or cluster: an operator with a thousand machines gets a
// handful of series, not a thousand (docs/observability.md).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names. Every label of the provider's metrics is one of these, with
// a bounded set of values.
const (
	// StageLabel is a provisioning stage (the Stage* constants).
	StageLabel = "stage"
	// ReasonLabel is a condition reason of the provider's API.
	ReasonLabel = "reason"
	// PhaseLabel is where a machine stands (the Phase* constants).
	PhaseLabel = "phase"
	// MethodLabel is how a root disk was cloned, or an HTTP method.
	MethodLabel = "method"
	// StateLabel is whether a golden volume is in use.
	StateLabel = "state"
	// InfraClusterLabel names an infra cluster: ManagementCluster, or the
	// namespace/name of its kubeconfig Secret.
	InfraClusterLabel = "infra_cluster"
	// CodeLabel is an HTTP status code, or "error" when no response came.
	CodeLabel = "code"
)

// ManagementCluster is the infra_cluster label of the management cluster.
const ManagementCluster = "management"

// Provisioning stages of a machine, in the order a machine passes them.
const (
	StageBootstrapData  = "bootstrap_data"
	StageGoldenImage    = "golden_image"
	StageRootDisk       = "root_disk"
	StageScheduling     = "scheduling"
	StageBoot           = "boot"
	StageBootstrapCheck = "bootstrap_check"
	// StageOther is any other wait: the owner, the infra cluster, a
	// failure before the VM exists.
	StageOther = "other"
)

// Where a machine stands, for MachinesDesc.
const (
	PhaseProvisioning = "provisioning"
	PhaseProvisioned  = "provisioned"
	PhaseFailed       = "failed"
	PhaseDeleting     = "deleting"
)

// Golden volume states, for GoldenImageVolumes.
const (
	GoldenImporting      = "importing"
	GoldenImportRetrying = "import_retrying"
	GoldenImportFailed   = "import_failed"
	GoldenInUse          = "in_use"
	GoldenUnused         = "unused"
)

var (
	// MachineProvisioningSeconds is observed once per machine, when it is
	// first provisioned.
	MachineProvisioningSeconds = histogram("capkv_machine_provisioning_seconds",
		"Seconds from a KubevirtMachine's creation until it was first provisioned (its VM runs and its bootstrap succeeded).",
		[]float64{15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600})
	// MachineStageSeconds is observed when a provisioning machine leaves a
	// stage whose start this process saw.
	MachineStageSeconds = histogramVec("capkv_machine_stage_seconds",
		"Seconds a provisioning machine spent in one stage: bootstrap_data, golden_image, root_disk, scheduling, boot, bootstrap_check or other.",
		[]float64{1, 5, 10, 30, 60, 120, 300, 600, 1800}, StageLabel)
	// MachineFailures counts machines entering a failure, by its reason.
	MachineFailures = counterVec("capkv_machine_failures_total",
		"Times a KubevirtMachine's status turned into a failure, by the failure's reason.", ReasonLabel)

	// GoldenImageImports counts golden images downloaded.
	GoldenImageImports = counter("capkv_golden_image_imports_total",
		"Golden image volumes whose import finished while this process ran.")
	// GoldenImageImportSeconds is how long imports took.
	GoldenImageImportSeconds = histogram("capkv_golden_image_import_seconds",
		"Seconds from a golden volume's creation until its import succeeded.",
		[]float64{10, 30, 60, 120, 300, 600, 1200, 1800, 3600})
	// GoldenImageImportBytes adds up the size of imported golden volumes.
	GoldenImageImportBytes = counter("capkv_golden_image_import_bytes_total",
		"Bytes of storage of the golden image volumes imported (the volumes' requested size).")
	// GoldenImageClones counts root disks cloned from golden volumes.
	GoldenImageClones = counterVec("capkv_golden_image_clones_total",
		"Root disks cloned from a golden volume, counted when the machine is first provisioned, by CDI's clone method: snapshot, csi-clone or copy (host-assisted).", MethodLabel)
	// GoldenImageVolumesCollected counts unused golden volumes deleted.
	GoldenImageVolumesCollected = counter("capkv_golden_image_volumes_collected_total",
		"Unused golden image volumes deleted after their retention.")

	// InfraClusterCaches counts the caches of external infra clusters.
	InfraClusterCaches = gauge("capkv_infra_cluster_caches",
		"Number of external infra clusters with a running cache (watches are added once their KubeVirt and CDI APIs are found).")
	// InfraClusterRequestSeconds is the latency of the provider's requests
	// to each infra cluster (watches left out).
	InfraClusterRequestSeconds = histogramVec("capkv_infra_cluster_request_duration_seconds",
		"Seconds the provider's requests to an infra cluster's API server took, watches left out, by HTTP method.",
		[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, InfraClusterLabel, MethodLabel)
	// InfraClusterRequestErrors counts failed requests to an infra cluster.
	InfraClusterRequestErrors = counterVec("capkv_infra_cluster_request_errors_total",
		"The provider's requests to an infra cluster that got no response (code \"error\"), were throttled (429) or failed on the server (5xx).", InfraClusterLabel, CodeLabel)

	// IsolationPoliciesCreated counts NetworkPolicies created.
	IsolationPoliciesCreated = counter("capkv_isolation_policies_created_total",
		"NetworkPolicies the provider created to isolate tenant clusters.")
	// IsolationDriftCorrected counts NetworkPolicies put back.
	IsolationDriftCorrected = counter("capkv_isolation_drift_corrected_total",
		"NetworkPolicies of the provider that someone changed and the provider put back.")
)

// All is every collector of the provider's own metrics.
func All() []prometheus.Collector {
	return []prometheus.Collector{
		MachineProvisioningSeconds, MachineStageSeconds, MachineFailures,
		GoldenImageImports, GoldenImageImportSeconds, GoldenImageImportBytes, GoldenImageClones,
		GoldenImageVolumes, GoldenImageVolumesCollected,
		InfraClusterCaches, InfraClusterRequestSeconds, InfraClusterRequestErrors,
		IsolationPoliciesCreated, IsolationDriftCorrected,
		Machines, InfraClusterUsers, OldestInStage,
	}
}

func init() { crmetrics.Registry.MustRegister(All()...) }

// The constructors of the metrics above: a name, its help and, for
// histograms, buckets; label names last.

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

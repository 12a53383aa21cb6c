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
	MachineProvisioningSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capkv_machine_provisioning_seconds",
		Help:    "Seconds from a KubevirtMachine's creation until it was first provisioned (its VM runs and its bootstrap succeeded).",
		Buckets: []float64{15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600},
	})
	// MachineStageSeconds is observed when a provisioning machine leaves a
	// stage whose start this process saw.
	MachineStageSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capkv_machine_stage_seconds",
		Help:    "Seconds a provisioning machine spent in one stage: bootstrap_data, golden_image, root_disk, scheduling, boot, bootstrap_check or other.",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{StageLabel})
	// MachineFailures counts machines entering a failure, by its reason.
	MachineFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capkv_machine_failures_total",
		Help: "Times a KubevirtMachine's status turned into a failure, by the failure's reason.",
	}, []string{ReasonLabel})

	// GoldenImageImports counts golden images downloaded.
	GoldenImageImports = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capkv_golden_image_imports_total",
		Help: "Golden image volumes whose import finished while this process ran.",
	})
	// GoldenImageImportSeconds is how long imports took.
	GoldenImageImportSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capkv_golden_image_import_seconds",
		Help:    "Seconds from a golden volume's creation until its import succeeded.",
		Buckets: []float64{10, 30, 60, 120, 300, 600, 1200, 1800, 3600},
	})
	// GoldenImageImportBytes adds up the size of imported golden volumes.
	GoldenImageImportBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capkv_golden_image_import_bytes_total",
		Help: "Bytes of storage of the golden image volumes imported (the volumes' requested size).",
	})
	// GoldenImageClones counts root disks cloned from golden volumes.
	GoldenImageClones = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capkv_golden_image_clones_total",
		Help: "Root disks cloned from a golden volume, counted when the machine is first provisioned, by CDI's clone method: snapshot, csi-clone or copy (host-assisted).",
	}, []string{MethodLabel})
	// GoldenImageVolumesCollected counts unused golden volumes deleted.
	GoldenImageVolumesCollected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capkv_golden_image_volumes_collected_total",
		Help: "Unused golden image volumes deleted after their retention.",
	})

	// InfraClusterCaches counts the caches of external infra clusters.
	InfraClusterCaches = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "capkv_infra_cluster_caches",
		Help: "Number of external infra clusters with a running cache (watches are added once their KubeVirt and CDI APIs are found).",
	})
	// InfraClusterRequestSeconds is the latency of the provider's requests
	// to each infra cluster (watches left out).
	InfraClusterRequestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capkv_infra_cluster_request_duration_seconds",
		Help:    "Seconds the provider's requests to an infra cluster's API server took, watches left out, by HTTP method.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{InfraClusterLabel, MethodLabel})
	// InfraClusterRequestErrors counts failed requests to an infra cluster.
	InfraClusterRequestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capkv_infra_cluster_request_errors_total",
		Help: "The provider's requests to an infra cluster that got no response (code \"error\"), were throttled (429) or failed on the server (5xx).",
	}, []string{InfraClusterLabel, CodeLabel})

	// IsolationPoliciesCreated counts NetworkPolicies created.
	IsolationPoliciesCreated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capkv_isolation_policies_created_total",
		Help: "NetworkPolicies the provider created to isolate tenant clusters.",
	})
	// IsolationDriftCorrected counts NetworkPolicies put back.
	IsolationDriftCorrected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capkv_isolation_drift_corrected_total",
		Help: "NetworkPolicies of the provider that someone changed and the provider put back.",
	})
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

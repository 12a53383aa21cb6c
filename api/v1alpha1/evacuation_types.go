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

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The actions the provider can take once the tenant Node of a VM with
// the External eviction strategy is drained.
const (
	// EvacuationRestartVM deletes the VM instance; KubeVirt starts a new
	// one on another infra node and the Machine keeps its identity.
	EvacuationRestartVM = "RestartVM"
	// EvacuationReplaceMachine deletes the Machine; its owner creates a
	// new one.
	EvacuationReplaceMachine = "ReplaceMachine"
)

// RestartRequestedAnnotation on a KubevirtMachine asks the provider to
// restart its VM once; the value (an RFC 3339 time) is recorded in
// status.lastRestartRequest when the restart is done, so a request is
// acted on exactly once. KubevirtRemediation sets it; so can a user.
const RestartRequestedAnnotation = "capkv.io/restart-requested-at"

// EvacuationSpec says what the provider does when KubeVirt asks for a VM
// with the External eviction strategy to leave its infra node (an infra
// node drain evicts its virt-launcher pod).
type EvacuationSpec struct {
	// action is what happens once the tenant Node is drained: RestartVM
	// (default) restarts the VM on another infra node, ReplaceMachine
	// deletes the Machine so its owner replaces it.
	// +kubebuilder:validation:Enum=RestartVM;ReplaceMachine
	// +kubebuilder:default=RestartVM
	// +optional
	Action string `json:"action,omitempty"`

	// tenantDrainTimeoutSeconds is how long the tenant Node's drain may
	// wait for pods that cannot be evicted yet (a PodDisruptionBudget says
	// no) before the VM leaves anyway, so that a blocked tenant does not
	// hold the infra drain forever. 0 waits forever.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=600
	// +optional
	TenantDrainTimeoutSeconds *int32 `json:"tenantDrainTimeoutSeconds,omitempty"`

	// liveMigrationTimeoutSeconds is how long the provider lets a live
	// migration of a LiveMigratable VM try first, before it cancels the
	// migration and falls back to draining the tenant Node. A VM that is
	// not LiveMigratable is never migrated. 0 never tries live migration.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=600
	// +optional
	LiveMigrationTimeoutSeconds *int32 `json:"liveMigrationTimeoutSeconds,omitempty"`
}

// EvacuationStatus records an evacuation in progress, so that it survives
// a restart of the provider.
type EvacuationStatus struct {
	// infraNodeName is the infra node the VM is leaving.
	InfraNodeName string `json:"infraNodeName"`
	// startTime is when the provider started the evacuation.
	StartTime metav1.Time `json:"startTime"`
	// instanceUID is the UID of the VM instance being evacuated; a new
	// instance means the VM has left.
	InstanceUID string `json:"instanceUID,omitempty"`
	// tenantNodeName is the tenant Node being drained.
	TenantNodeName string `json:"tenantNodeName,omitempty"`
	// cordonedTenantNode is true when the provider cordoned the tenant
	// Node, and so must uncordon it.
	CordonedTenantNode bool `json:"cordonedTenantNode,omitempty"`
	// instanceDeleted is true once the provider deleted the instance (or
	// the Machine).
	InstanceDeleted bool `json:"instanceDeleted,omitempty"`
	// migrationName is the VirtualMachineInstanceMigration the provider
	// created to live migrate the VM first.
	// +optional
	MigrationName string `json:"migrationName,omitempty"`
	// migrationUID is that migration's UID, as the instance's
	// status.migrationState reports it.
	// +optional
	MigrationUID string `json:"migrationUID,omitempty"`
	// migrationAbandoned is true once the provider chose the tenant drain
	// over live migration: the VM could not migrate, live migration is
	// switched off, or the migration failed or timed out.
	// +optional
	MigrationAbandoned bool `json:"migrationAbandoned,omitempty"`
}

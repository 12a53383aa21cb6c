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

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// Condition types and reasons shared by KubevirtCluster and KubevirtMachine.
// The Ready condition summarizes the others; Cluster API mirrors it into the
// owner's InfrastructureReady condition.
const (
	// ReadyCondition summarizes the other conditions.
	ReadyCondition = clusterv1.ReadyCondition
	// PausedCondition is True while the object or its Cluster is paused.
	PausedCondition = clusterv1.PausedCondition

	// InfraClusterAvailableCondition is True when the infra cluster is reachable
	// and serves the KubeVirt and CDI APIs the provider needs.
	InfraClusterAvailableCondition = "InfraClusterAvailable"

	// AvailableReason: the infra cluster serves every needed API (Cluster
	// API's generic reason).
	AvailableReason = clusterv1.AvailableReason
	// KubeVirtNotInstalledReason: the infra cluster lacks KubeVirt's CRDs.
	KubeVirtNotInstalledReason = "KubeVirtNotInstalled"
	// CDINotInstalledReason: the infra cluster lacks CDI's CRDs.
	CDINotInstalledReason = "CDINotInstalled"
	// InfraClusterUnreachableReason: the infra cluster's API could not be
	// queried, or its kubeconfig Secret could not be read; the message
	// carries the error.
	InfraClusterUnreachableReason = "InfraClusterUnreachable"
	// InfraClusterSecretInvalidReason: the kubeconfig Secret naming the infra
	// cluster is missing, incomplete, or not allowed; the message says which.
	InfraClusterSecretInvalidReason = "InfraClusterSecretInvalid" //nolint:gosec // a condition reason, not a credential
	// NotAllowedByPolicyReason: the multi-tenancy policy does not let the
	// object use what it names (an infra namespace, a kubeconfig Secret, an
	// identity, a volume or network of its VM); nothing was created for it
	// (docs/multi-tenancy.md).
	NotAllowedByPolicyReason = "NotAllowedByPolicy"

	// WaitingForOwnerReason: the Cluster API owner (Cluster or Machine) is not
	// set yet.
	WaitingForOwnerReason = "WaitingForOwner"

	// DeletingReason: the object's infra objects are being deleted (Cluster
	// API's generic reason).
	DeletingReason = clusterv1.DeletingReason

	// ReadyReason, NotReadyReason and ReadyUnknownReason are the reasons of
	// the Ready summary (Cluster API's generic reasons); ReadyReason is also
	// VirtualMachineReady's when the VM instance runs and is ready.
	ReadyReason        = clusterv1.ReadyReason
	NotReadyReason     = clusterv1.NotReadyReason
	ReadyUnknownReason = clusterv1.ReadyUnknownReason
	// InternalErrorReason: the provider could not compute a condition (Cluster
	// API's generic reason).
	InternalErrorReason = clusterv1.InternalErrorReason
)

// The CapacityKnown condition of a KubevirtMachineTemplate and a
// KubevirtMachinePool, and its reasons.
const (
	// CapacityKnownCondition is True when status.capacity could be computed
	// from the template.
	CapacityKnownCondition = "CapacityKnown"
	// FromTemplateReason: capacity was read from the VM template.
	FromTemplateReason = "FromTemplate"
	// FromInstancetypeReason: capacity was read from the instance type.
	FromInstancetypeReason = "FromInstancetype"
	// CapacityUnknownReason: the template does not say how much CPU or memory
	// a machine gets; the message says what is missing.
	CapacityUnknownReason = "CapacityUnknown"
	// InstancetypeUnavailableReason: the template's instance type could not
	// be read from the infra cluster; the message carries the error.
	InstancetypeUnavailableReason = "InstancetypeUnavailable"
)

// Conditions and reasons of a KubevirtMachine.
const (
	// VirtualMachineReadyCondition is True when the VM's instance runs and
	// is ready; False reasons say what it waits for, with KubeVirt's and
	// CDI's own messages.
	VirtualMachineReadyCondition = "VirtualMachineReady"
	// BootstrapSucceededCondition is True when the guest finished
	// bootstrapping, as far as the chosen check can tell.
	BootstrapSucceededCondition = "BootstrapSucceeded"

	// WaitingForBootstrapDataReason: the Machine has no bootstrap data yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// BootstrapDataInvalidReason: the bootstrap or network data Secret cannot
	// be used; the message says why.
	BootstrapDataInvalidReason = "BootstrapDataInvalid"
	// CreateFailedReason: the VM could not be built from the spec, or the
	// infra cluster refused it.
	CreateFailedReason = "CreateFailed"
	// PresetUnsupportedReason: no infra node offers what the machine's sizing
	// preset needs (dedicated CPUs, hugepages); the message says what is
	// missing.
	PresetUnsupportedReason = "PresetUnsupported"
	// StartFailedReason: the VM exists but KubeVirt reports that it cannot
	// start its instance; the message carries KubeVirt's.
	StartFailedReason = "StartFailed"
	// NameConflictReason: a VM, user data Secret or golden DataVolume of that
	// name exists and was not created by the provider for this machine.
	NameConflictReason = "NameConflict"
	// AdoptedReason: the VM was made by the community KubeVirt provider
	// for this machine and adopted in place (docs/migrating-from-capk.md):
	// VirtualMachineReady's ready reason while its first instance runs,
	// and BootstrapSucceeded's, which the community provider checked.
	AdoptedReason = "Adopted"
	// WaitingForGoldenImageReason: the golden volume of the root disk is
	// being imported; the message carries CDI's progress or retry error.
	WaitingForGoldenImageReason = "WaitingForGoldenImage"
	// CloneNotAuthorizedReason: the VM's service account may not clone the
	// admin-provided image from its namespace.
	CloneNotAuthorizedReason = "CloneNotAuthorized"
	// GoldenImageFailedReason: the golden volume could not be made.
	GoldenImageFailedReason = "GoldenImageFailed"
	// DiskImportingReason: a DataVolume of the VM is being imported.
	DiskImportingReason = "DiskImporting"
	// DiskCloningReason: a DataVolume of the VM is being cloned.
	DiskCloningReason = "DiskCloning"
	// DiskPendingReason: a DataVolume of the VM waits (binding, scheduling).
	DiskPendingReason = "DiskPending"
	// DiskFailedReason: CDI gave up on a DataVolume of the VM.
	DiskFailedReason = "DiskFailed"
	// UnschedulableReason: no infra node can take the VM.
	UnschedulableReason = "Unschedulable"
	// InsufficientDevicesReason: no infra node has free the GPUs or host
	// devices the VM asks for; the message names the resource, how many
	// the VM asks for and how many are free (docs/gpus.md).
	InsufficientDevicesReason = "InsufficientDevices"
	// QuotaExceededReason: a ResourceQuota of the infra namespace refused
	// the VM's launcher pod or a claim of its disks; the message names the
	// quota and the exhausted resources, in the API server's words
	// (docs/operations.md#quota).
	QuotaExceededReason = "QuotaExceeded"
	// LimitRangeViolatedReason: a LimitRange of the infra namespace refused
	// the VM's launcher pod or a claim of its disks; the message carries the
	// API server's (docs/operations.md#limit-ranges).
	LimitRangeViolatedReason = "LimitRangeViolated"
	// PendingReason: KubeVirt has not started an instance yet.
	PendingReason = "Pending"
	// WaitingForIPAddressReason: an IPAddressClaim of the machine has no
	// address yet; the message names the pool and carries the IPAM
	// provider's reason, such as an exhausted pool (docs/ipam.md).
	WaitingForIPAddressReason = "WaitingForIPAddress"
	// AddressNetworkInvalidReason: networkAddresses names a network the VM
	// lacks, or its pod network.
	AddressNetworkInvalidReason = "AddressNetworkInvalid"
	// NodeNetworkNotFoundReason: nodeAddressNetwork names no network of the
	// VM.
	NodeNetworkNotFoundReason = "NodeNetworkNotFound"
	// BootingReason: the instance is scheduled or running but not ready.
	BootingReason = "Booting"
	// StoppedReason: the instance stopped or failed and KubeVirt will not
	// start it again (the run strategy says so).
	StoppedReason = "Stopped"
	// RestartingReason: the instance stopped or failed and KubeVirt starts
	// a new one, as the VM's run strategy asks; the machine is not dead.
	RestartingReason = "Restarting"
	// CrashLoopBackOffReason: the VM's instances keep failing and KubeVirt
	// waits longer before each new start; the message says how long.
	CrashLoopBackOffReason = "CrashLoopBackOff"
	// VirtualMachineDeletedReason: the VM disappeared behind the provider's back. This is
	// terminal: the machine is not recreated with a new identity, so a
	// MachineHealthCheck replaces it.
	VirtualMachineDeletedReason = "VirtualMachineDeleted"

	// WaitingForBootstrapReason: the bootstrap check has not passed yet.
	WaitingForBootstrapReason = "WaitingForBootstrap"
	// CheckFailedReason: the bootstrap check could not run; the message says
	// why (for ssh: connection, host key or login errors).
	CheckFailedReason = "CheckFailed"
	// SucceededReason: the bootstrap check passed.
	SucceededReason = "Succeeded"
)

// The condition that tells whether the guest joined its workload cluster. It
// is informational: Ready does not wait for it, since Cluster API finds the
// Node only once the machine is provisioned (docs/images.md).
const (
	// NodeJoinedCondition is True once Cluster API found the machine's
	// Node in the workload cluster.
	NodeJoinedCondition = "NodeJoined"
	// NodeJoinedReason: the Machine has a nodeRef.
	NodeJoinedReason = "NodeJoined"
	// WaitingForNodeReason: the VM runs and its Node has not joined yet,
	// within --node-join-timeout.
	WaitingForNodeReason = "WaitingForNode"
	// NodeNotJoinedReason: the VM has run longer than --node-join-timeout
	// without a Node; the message names the image and the version it must
	// carry.
	NodeNotJoinedReason = "NodeNotJoined"
)

// Conditions and reasons of a KubevirtMachine's life on its infra node:
// live migration and evacuation (docs/lifecycle.md).
const (
	// LiveMigratableCondition mirrors the VM instance's own LiveMigratable
	// condition: whether KubeVirt can move it to another infra node.
	LiveMigratableCondition = "LiveMigratable"
	// MigratableReason and NotMigratableReason stand in for KubeVirt's
	// reason when its LiveMigratable condition has none; otherwise
	// KubeVirt's own reason is kept.
	MigratableReason    = "Migratable"
	NotMigratableReason = "NotMigratable"

	// MigratingCondition is True while KubeVirt live-migrates the VM, and
	// False with the result once it is over.
	MigratingCondition = "Migrating"
	// MigrationRunningReason: a live migration is in progress.
	MigrationRunningReason = "MigrationRunning"
	// MigrationSucceededReason: the last live migration completed; the
	// message says from where to where.
	MigrationSucceededReason = "MigrationSucceeded"
	// MigrationFailedReason: the last live migration failed; the VM kept
	// running on its source node.
	MigrationFailedReason = "MigrationFailed"

	// EvacuatingCondition is True while the provider moves a VM with the
	// External eviction strategy off a draining infra node, and False once
	// it is done.
	EvacuatingCondition = "Evacuating"
	// WaitingForControlPlaneTurnReason: another machine of the same
	// control plane is being evacuated; this one waits its turn.
	WaitingForControlPlaneTurnReason = "WaitingForControlPlaneTurn"
	// LiveMigratingReason: the provider live migrates the VM first; the
	// message names the migration and when it stops waiting for it.
	LiveMigratingReason = "LiveMigrating"
	// DrainingTenantNodeReason: the tenant Node is cordoned and its pods
	// are being evicted.
	DrainingTenantNodeReason = "DrainingTenantNode"
	// TenantDrainBlockedReason: some pods of the tenant Node cannot be
	// evicted yet; the message names them, the PodDisruptionBudget that
	// holds them, and when the provider stops waiting.
	TenantDrainBlockedReason = "TenantDrainBlocked"
	// RestartingVMReason: the instance was deleted so that KubeVirt starts
	// the VM on another infra node.
	RestartingVMReason = "RestartingVM"
	// ReplacingMachineReason: the Machine was deleted so that its owner
	// replaces it.
	ReplacingMachineReason = "ReplacingMachine"
	// EvacuatedReason: the VM left the infra node and its tenant Node is
	// schedulable again.
	EvacuatedReason = "Evacuated"
)

// Conditions and reasons of a KubevirtCluster.
const (
	// ControlPlaneEndpointReadyCondition is True once the control-plane
	// endpoint is known.
	ControlPlaneEndpointReadyCondition = "ControlPlaneEndpointReady"
	// EndpointReadyReason: the endpoint is set.
	EndpointReadyReason = "EndpointReady"
	// WaitingForEndpointReason: the Service has no address yet, or the user
	// must provide one; the message says which.
	WaitingForEndpointReason = "WaitingForEndpoint"
	// ServiceFailedReason: the control-plane Service could not be created or
	// corrected; the message carries the API error.
	ServiceFailedReason = "ServiceFailed"

	// NetworkIsolationReadyCondition is True once the cluster's
	// NetworkPolicies are in place, or isolation is disabled.
	NetworkIsolationReadyCondition = "NetworkIsolationReady"
	// AppliedReason: the isolation (and custom) policies are in
	// place.
	AppliedReason = "Applied"
	// DisabledReason: isolation is off; only custom policies are
	// kept.
	DisabledReason = "Disabled"
	// NetworkPolicyFailedReason: a NetworkPolicy could not be created,
	// corrected or deleted; the message carries the API error.
	NetworkPolicyFailedReason = "NetworkPolicyFailed"

	// NetworksReadyCondition is True once the networks created for the
	// cluster exist.
	NetworksReadyCondition = "NetworksReady"
	// CreatedReason: every network created for the cluster exists
	// (or none is wanted).
	CreatedReason = "Created"
	// TemplateInvalidReason: the per-cluster network template is
	// missing, not a template, or renders no valid config.
	TemplateInvalidReason = "TemplateInvalid"
	// VLANUnavailableReason: no VLAN is free in the template's range, or the
	// requested one is used by another cluster.
	VLANUnavailableReason = "VLANUnavailable"
	// NetworkFailedReason: the NetworkAttachmentDefinition could not be
	// created or corrected; the message carries the API error.
	NetworkFailedReason = "NetworkFailed"

	// ControlPlaneImageReadyCondition is True once the golden image the
	// control-plane machines clone is imported, or there is none to wait
	// for. The cluster is provisioned only then, so Cluster API creates
	// no control-plane machine, and the health check's node startup clock
	// does not start, while the image downloads. While False, the reason
	// is WaitingForGoldenImage, GoldenImageFailed, WaitingForControlPlane,
	// NameConflict or NotAllowedByPolicy.
	ControlPlaneImageReadyCondition = "ControlPlaneImageReady"
	// ImportedReason: the control plane's golden volume holds its image.
	ImportedReason = "Imported"
	// NoGoldenImageReason: the control-plane machines clone no golden
	// image, or the control plane names no KubevirtMachineTemplate.
	NoGoldenImageReason = "NoGoldenImage"
	// NotAwaitedReason: the provider does not know which golden volume the
	// control-plane machines will clone (it may not read the control
	// plane's kind, or the template names an infra cluster or namespace of
	// its own), or the cluster was provisioned before this was checked;
	// the machines import it themselves.
	NotAwaitedReason = "NotAwaited"
	// WaitingForControlPlaneReason: the Cluster names a control plane that
	// does not exist yet.
	WaitingForControlPlaneReason = "WaitingForControlPlane"
)

// ClusterFinalizer keeps a KubevirtCluster until what was created for it on
// the infra cluster is gone.
const ClusterFinalizer = "kubevirtcluster.infrastructure.cluster.x-k8s.io"

// The VirtualMachinePoolReady condition of a KubevirtMachinePool and its
// reasons.
const (
	// VirtualMachinePoolReadyCondition is True when the pool's
	// VirtualMachinePool exists with the desired replicas and every instance
	// is ready.
	VirtualMachinePoolReadyCondition = "VirtualMachinePoolReady"
	// WaitingForMachinePoolReason: no Cluster API MachinePool owns the
	// KubevirtMachinePool yet.
	WaitingForMachinePoolReason = "WaitingForMachinePool"
	// ScalingReason: the pool has more or fewer instances than the
	// MachinePool asks for, or some are not ready yet; the message counts
	// them.
	ScalingReason = "Scaling"
	// PoolCreateFailedReason: the VirtualMachinePool could not be built from
	// the pool's spec, or the infra cluster refused it; the message carries
	// the error.
	PoolCreateFailedReason = "PoolCreateFailed"
	// VirtualMachinePoolsNotServedReason: the infra cluster's KubeVirt does
	// not serve pool.kubevirt.io/v1beta1.
	VirtualMachinePoolsNotServedReason = "VirtualMachinePoolsNotServed"
	// RollingReason: instances made from an older machine template are
	// being replaced, one at a time, through their Machines.
	RollingReason = "Rolling"
)

// Condition and reasons of an in-place update: Cluster API's in-place
// updates grow a running VM instead of replacing the machine
// (docs/in-place-updates.md).
const (
	// InPlaceUpdatedCondition says whether the running VM has what the
	// KubevirtMachine's spec asks of it after an in-place update; it is
	// absent on machines that were never updated in place.
	InPlaceUpdatedCondition = "InPlaceUpdated"
	// InPlaceUpdatedReason: the VM runs with the spec's CPU sockets, guest
	// memory, labels and annotations.
	InPlaceUpdatedReason = "InPlaceUpdated"
	// InPlaceUpdatingReason: KubeVirt is applying the change, usually by a
	// live migration to a larger launcher; the message says what it waits
	// for.
	InPlaceUpdatingReason = "InPlaceUpdating"
	// InPlaceUpdateFailedReason: KubeVirt cannot apply the change to the
	// running VM (it asks for a restart, or the VM cannot migrate); the
	// message gives KubeVirt's reason. The machine must be replaced.
	InPlaceUpdateFailedReason = "InPlaceUpdateFailed"
)

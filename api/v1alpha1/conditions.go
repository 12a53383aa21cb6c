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

	// InfraClusterAvailableReason: the infra cluster serves every needed API.
	InfraClusterAvailableReason = "Available"
	// KubeVirtNotInstalledReason: the infra cluster lacks KubeVirt's CRDs.
	KubeVirtNotInstalledReason = "KubeVirtNotInstalled"
	// CDINotInstalledReason: the infra cluster lacks CDI's CRDs.
	CDINotInstalledReason = "CDINotInstalled"
	// InfraClusterUnreachableReason: the infra cluster's API could not be
	// queried; the message carries the error.
	InfraClusterUnreachableReason = "InfraClusterUnreachable"

	// WaitingForOwnerReason: the Cluster API owner (Cluster or Machine) is not
	// set yet.
	WaitingForOwnerReason = "WaitingForOwner"
)

// Reasons of the TemplateCapacity condition on KubevirtMachineTemplate.
const (
	// CapacityKnownCondition is True when status.capacity could be computed
	// from the template.
	CapacityKnownCondition = "CapacityKnown"
	// CapacityFromTemplateReason: capacity was read from the VM template.
	CapacityFromTemplateReason = "FromTemplate"
	// CapacityFromInstancetypeReason: capacity was read from the instance type.
	CapacityFromInstancetypeReason = "FromInstancetype"
	// CapacityUnknownReason: the template does not say how much CPU or memory
	// a machine gets; the message says what is missing.
	CapacityUnknownReason = "Unknown"
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
	// VMCreateFailedReason: the infra cluster refused the VM or a Secret.
	VMCreateFailedReason = "CreateFailed"
	// VMConflictReason: a VM of that name exists and was not created for
	// this KubevirtMachine.
	VMConflictReason = "NameConflict"
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
	// VMPendingReason: KubeVirt has not started an instance yet.
	VMPendingReason = "Pending"
	// NodeNetworkNotFoundReason: nodeAddressNetwork names no network of the
	// VM.
	NodeNetworkNotFoundReason = "NodeNetworkNotFound"
	// BootingReason: the instance is scheduled or running but not ready.
	BootingReason = "Booting"
	// VMStoppedReason: the instance stopped or failed.
	VMStoppedReason = "Stopped"
	// VMDeletedReason: the VM disappeared behind the provider's back. This is
	// terminal: the machine is not recreated with a new identity, so a
	// MachineHealthCheck replaces it.
	VMDeletedReason = "VirtualMachineDeleted"
	// VMReadyReason: the instance runs and is ready.
	VMReadyReason = "Ready"

	// BootstrapCheckPendingReason: the check has not passed yet.
	BootstrapCheckPendingReason = "WaitingForBootstrap"
	// BootstrapCheckFailedReason: the check could not run; the message says
	// why (for ssh: connection, host key or login errors).
	BootstrapCheckFailedReason = "CheckFailed"
	// BootstrapSucceededReason: the check passed.
	BootstrapSucceededReason = "Succeeded"

	// DeletingReason: the VM and its objects are being deleted.
	DeletingReason = "Deleting"
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
	// IsolationAppliedReason: the isolation (and custom) policies are in
	// place.
	IsolationAppliedReason = "Applied"
	// IsolationDisabledReason: isolation is off; only custom policies are
	// kept.
	IsolationDisabledReason = "Disabled"
	// NetworkPolicyFailedReason: a NetworkPolicy could not be created,
	// corrected or deleted; the message carries the API error.
	NetworkPolicyFailedReason = "NetworkPolicyFailed"

	// NetworksReadyCondition is True once the networks created for the
	// cluster exist.
	NetworksReadyCondition = "NetworksReady"
	// NetworksCreatedReason: every network created for the cluster exists
	// (or none is wanted).
	NetworksCreatedReason = "Created"
	// NetworkTemplateInvalidReason: the per-cluster network template is
	// missing, not a template, or renders no valid config.
	NetworkTemplateInvalidReason = "TemplateInvalid"
	// VLANUnavailableReason: no VLAN is free in the template's range, or the
	// requested one is used by another cluster.
	VLANUnavailableReason = "VLANUnavailable"
	// NetworkFailedReason: the NetworkAttachmentDefinition could not be
	// created or corrected; the message carries the API error.
	NetworkFailedReason = "NetworkFailed"
)

// ClusterFinalizer keeps a KubevirtCluster until what was created for it on
// the infra cluster is gone.
const ClusterFinalizer = "kubevirtcluster.infrastructure.cluster.x-k8s.io"

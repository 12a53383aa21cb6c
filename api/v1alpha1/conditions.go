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

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

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Defaults of a KubevirtRemediationSpec, applied by the API server, the
// webhook and the controller alike when a field is left out.
const (
	// DefaultRemediationRetryLimit is the number of restarts tried before
	// the Machine is handed back to its owner.
	DefaultRemediationRetryLimit int32 = 1
	// DefaultRemediationTimeoutSeconds is how long a restarted Machine may
	// stay unhealthy before the next restart or giving up.
	DefaultRemediationTimeoutSeconds int32 = 300
)

// KubevirtRemediationSpec says how a KubevirtRemediation restarts the VM of
// an unhealthy Machine.
type KubevirtRemediationSpec struct {
	// retryLimit is how many times the VM is restarted before the provider
	// gives up and hands the Machine back to its owner (MachineSet or
	// KubeadmControlPlane), which replaces it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=1
	// +optional
	RetryLimit int32 `json:"retryLimit,omitempty"`

	// timeoutSeconds is how long after a restart the Machine may stay
	// unhealthy (the MachineHealthCheck has not deleted this object)
	// before the next restart, or giving up once retryLimit restarts were
	// tried. Leave it longer than the time a VM needs to boot and its Node
	// to become ready.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=300
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// KubevirtRemediationPhase is where a KubevirtRemediation stands.
// +kubebuilder:validation:Enum=Remediating;Waiting;Failed
type KubevirtRemediationPhase string

// Phases of a KubevirtRemediation.
const (
	// RemediationPhaseRemediating: the remediation started and no restart
	// was requested yet (the Machine or its KubevirtMachine is not there).
	RemediationPhaseRemediating KubevirtRemediationPhase = "Remediating"
	// RemediationPhaseWaiting: a restart was requested at lastRemediated;
	// the provider waits timeoutSeconds for the Machine to become healthy,
	// when the MachineHealthCheck deletes this object.
	RemediationPhaseWaiting KubevirtRemediationPhase = "Waiting"
	// RemediationPhaseFailed: restarting did not help or cannot help; the
	// Machine was handed back to its owner, which replaces it.
	RemediationPhaseFailed KubevirtRemediationPhase = "Failed"
)

// The condition of a KubevirtRemediation and its reasons.
const (
	// RemediatingCondition is True while the provider remediates by
	// restarting the VM; False while it waits for the Machine to exist, and
	// once it has handed the Machine back to its owner.
	RemediatingCondition = "Remediating"

	// RestartedVirtualMachineReason: the provider asked for the VM to be
	// restarted (the message says which attempt and when), and waits for
	// the Machine to become healthy.
	RestartedVirtualMachineReason = "RestartedVirtualMachine"
	// RetryLimitReachedReason: retryLimit restarts did not make the Machine
	// healthy within timeoutSeconds; the Machine was handed back to its
	// owner for replacement.
	RetryLimitReachedReason = "RetryLimitReached"
	// NotRestartableReason: the VM would not start again after a restart
	// (its runStrategy is not Always), or the Machine is not a
	// KubevirtMachine; the Machine was handed back to its owner at once.
	NotRestartableReason = "NotRestartable"
	// WaitingForMachineReason: the Machine or its KubevirtMachine does not
	// exist (yet); nothing was restarted.
	WaitingForMachineReason = "WaitingForMachine"
)

// KubevirtRemediationStatus is the progress of a remediation; it survives
// a restart of the provider.
type KubevirtRemediationStatus struct {
	// phase is where the remediation stands: Remediating, Waiting or
	// Failed.
	// +optional
	Phase KubevirtRemediationPhase `json:"phase,omitempty"`

	// retryCount is the number of restarts requested so far.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RetryCount int32 `json:"retryCount,omitempty"`

	// lastRemediated is when the last restart was requested.
	// +optional
	LastRemediated metav1.Time `json:"lastRemediated,omitempty,omitzero"`

	// conditions report the remediation: Remediating, and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtremediations,scope=Namespaced,categories=cluster-api,shortName=kvr
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the remediated Machine belongs to"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Where the remediation stands"
// +kubebuilder:printcolumn:name="Retries",type="integer",JSONPath=".status.retryCount",description="Restarts requested so far"
// +kubebuilder:printcolumn:name="Last",type="date",JSONPath=".status.lastRemediated",description="When the last restart was requested"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Remediating')].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtRemediation restarts the VM of one unhealthy Machine instead of
// replacing the Machine. A MachineHealthCheck whose remediation template is
// a KubevirtRemediationTemplate creates it, named after the Machine and
// owned by it, and deletes it once the Machine is healthy again.
type KubevirtRemediation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says how often to restart and how long to wait.
	// +kubebuilder:default={}
	// +optional
	Spec KubevirtRemediationSpec `json:"spec,omitempty,omitzero"`
	// status is the progress of the remediation.
	// +optional
	Status KubevirtRemediationStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions, for CAPI's condition utilities.
func (r *KubevirtRemediation) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions sets the conditions, for CAPI's condition utilities.
func (r *KubevirtRemediation) SetConditions(conditions []metav1.Condition) {
	r.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubevirtRemediationList is a list of KubevirtRemediations.
type KubevirtRemediationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtRemediation `json:"items"`
}

// KubevirtRemediationTemplateSpec holds the template a MachineHealthCheck
// makes KubevirtRemediations from.
type KubevirtRemediationTemplateSpec struct {
	// template is the KubevirtRemediation to create for each unhealthy
	// Machine.
	Template KubevirtRemediationTemplateResource `json:"template"`
}

// KubevirtRemediationTemplateResource is the metadata and spec of a
// KubevirtRemediation made from a template.
type KubevirtRemediationTemplateResource struct {
	// metadata holds labels and annotations added to the
	// KubevirtRemediation.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec is the spec of the KubevirtRemediation.
	// +kubebuilder:default={}
	// +optional
	Spec KubevirtRemediationSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtremediationtemplates,scope=Namespaced,categories=cluster-api,shortName=kvrt
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move="
// +kubebuilder:printcolumn:name="Retry limit",type="integer",JSONPath=".spec.template.spec.retryLimit",description="Restarts before the Machine is replaced"
// +kubebuilder:printcolumn:name="Timeout",type="integer",JSONPath=".spec.template.spec.timeoutSeconds",description="Seconds a restarted Machine may stay unhealthy"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtRemediationTemplate is what a MachineHealthCheck's
// spec.remediation.templateRef points at for reboot-style remediation:
// an unhealthy Machine's VM is restarted before the Machine is replaced.
// Its CRD carries clusterctl's move label, so clusterctl move takes the
// templates of a namespace along with its MachineHealthChecks.
type KubevirtRemediationTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec KubevirtRemediationTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// KubevirtRemediationTemplateList is a list of KubevirtRemediationTemplates.
type KubevirtRemediationTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtRemediationTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtRemediation{}, &KubevirtRemediationList{},
		&KubevirtRemediationTemplate{}, &KubevirtRemediationTemplateList{})
}

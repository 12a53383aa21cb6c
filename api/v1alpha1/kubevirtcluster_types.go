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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// KubevirtClusterSpec is the desired state of the infrastructure of one tenant
// cluster on the infra cluster.
type KubevirtClusterSpec struct {
	// controlPlaneEndpoint is the endpoint the tenant's API server is reached
	// at. A host or port set by the user is respected and never overwritten.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// controlPlaneServiceTemplate shapes the Service that fronts the
	// control-plane virtual machines.
	// +optional
	ControlPlaneServiceTemplate ControlPlaneServiceTemplate `json:"controlPlaneServiceTemplate,omitempty,omitzero"`

	// sshKeys names where the SSH keys for the cluster's machines are kept.
	// +optional
	SSHKeys SSHKeys `json:"sshKeys,omitempty,omitzero"`

	// failureDomains lists where machines may be placed. Empty means one
	// failure domain per value of the infra nodes' topology.kubernetes.io/zone
	// label, all eligible for control-plane machines.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []FailureDomainSpec `json:"failureDomains,omitempty"`

	// isolation shapes the NetworkPolicies that isolate the cluster's VMs;
	// on unless mode is Disabled.
	// +optional
	Isolation IsolationSpec `json:"isolation,omitempty,omitzero"`

	// customNetworkPolicies are NetworkPolicies kept for the cluster's VMs
	// besides the isolation ones, also when isolation is disabled.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	CustomNetworkPolicies []CustomNetworkPolicy `json:"customNetworkPolicies,omitempty"`

	// network lists Multus networks for every machine of the cluster.
	// +optional
	Network ClusterNetworkSpec `json:"network,omitempty,omitzero"`

	// dnsPolicy is the DNS policy of every VM whose template sets neither
	// dnsPolicy nor dnsConfig.
	// +optional
	// +kubebuilder:validation:Enum=ClusterFirstWithHostNet;ClusterFirst;Default;None
	DNSPolicy corev1.DNSPolicy `json:"dnsPolicy,omitempty"`

	// dnsConfig is the DNS configuration of every VM whose template sets
	// neither dnsPolicy nor dnsConfig.
	// +optional
	DNSConfig *corev1.PodDNSConfig `json:"dnsConfig,omitempty"`

	// infraClusterSecretRef references a Secret, in the KubevirtCluster's
	// namespace unless a namespace is given, holding the kubeconfig of an
	// external infra cluster under the key "kubeconfig" and optionally the
	// namespace to use there under the key "namespace". When unset, the
	// management cluster is the infra cluster. Only kind Secret is allowed.
	// +optional
	InfraClusterSecretRef *corev1.ObjectReference `json:"infraClusterSecretRef,omitempty"`

	// identityRef names the KubevirtClusterIdentity, an administrator's
	// grant, that says which infra cluster and namespaces the cluster may
	// use and what its VMs may reach (docs/multi-tenancy.md). When unset,
	// everything stays in the KubevirtCluster's own namespace. It cannot be
	// combined with infraClusterSecretRef.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// tenantCloud gives the tenant's KubeVirt cloud controller manager and
	// CSI driver a least-privilege infra credential, rotated before it
	// expires; off unless it names a component.
	// +optional
	TenantCloud TenantCloudSpec `json:"tenantCloud,omitempty,omitzero"`
}

// FailureDomainSpec is one place machines can be put in.
type FailureDomainSpec struct {
	// name of the failure domain, as Machines name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// controlPlane says whether control-plane machines may go there;
	// default true.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// nodeSelector is the infra node labels of the failure domain; empty
	// means topology.kubernetes.io/zone=<name>.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// APIEndpoint is a reachable Kubernetes API endpoint.
type APIEndpoint struct {
	// host is the hostname or IP address the API server is serving on.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// port is the port the API server is serving on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero reports whether neither host nor port is set.
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// ControlPlaneServiceTemplate shapes the control-plane Service.
type ControlPlaneServiceTemplate struct {
	// metadata sets labels, annotations and the namespace of the Service. The
	// namespace defaults to the infra cluster namespace.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec overrides fields of the Service spec.
	// +optional
	Spec ServiceSpecTemplate `json:"spec,omitempty,omitzero"`
}

// ServiceTypeNone creates no control-plane Service: the endpoint is provided
// elsewhere (an external load balancer, a hosted control plane) and must be
// set in controlPlaneEndpoint.
const ServiceTypeNone corev1.ServiceType = "None"

// DefaultAPIServerPort is the port of the tenant API server in the VMs and,
// unless configured, of the Service.
const DefaultAPIServerPort = 6443

// ServiceSpecTemplate holds the Service spec fields a user may set.
type ServiceSpecTemplate struct {
	// type is how the Service is exposed: ClusterIP (the default), NodePort,
	// LoadBalancer, or None for no Service at all.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer;None
	Type corev1.ServiceType `json:"type,omitempty"`

	// port is the Service port clients connect to; empty means the port of
	// controlPlaneEndpoint if set, else 6443.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// targetPort is the port the API server listens on in the control-plane
	// VMs; empty means 6443.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort int32 `json:"targetPort,omitempty"`
}

// SSHKeys names where the SSH keys for the cluster's machines are kept.
type SSHKeys struct {
	// configRef references the Secret with the SSH key pair. Only kind Secret
	// is allowed.
	// +optional
	ConfigRef *corev1.ObjectReference `json:"configRef,omitempty"`

	// dataSecretName is the name of the Secret holding the SSH key data.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DataSecretName *string `json:"dataSecretName,omitempty"`
}

// SecretName is the Secret, in the KubevirtCluster's namespace, holding the
// cluster's SSH client keys: dataSecretName, else <cluster>-ssh-keys.
func (k SSHKeys) SecretName(clusterName string) string {
	if k.DataSecretName != nil {
		return *k.DataSecretName
	}
	return clusterName + "-ssh-keys"
}

// KubevirtClusterStatus is the observed state of a KubevirtCluster.
type KubevirtClusterStatus struct {
	// ready is true when the cluster infrastructure is provisioned. It mirrors
	// initialization.provisioned for clients of the v1beta1 contract.
	// +optional
	Ready bool `json:"ready"`

	// initialization reports when the cluster infrastructure was provisioned.
	// +optional
	Initialization KubevirtClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains lists the failure domains machines can be placed in.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// network reports the networks created for the cluster.
	// +optional
	Network ClusterNetworkStatus `json:"network,omitempty,omitzero"`

	// tenantCloud reports the infra credential handed to the tenant cluster.
	// +optional
	TenantCloud TenantCloudStatus `json:"tenantCloud,omitempty,omitzero"`

	// goldenImage is the golden volume of the control plane's machines
	// while the cluster waits for its import, before it is provisioned; it
	// keeps the volume in use meanwhile.
	// +optional
	GoldenImage *GoldenImageStatus `json:"goldenImage,omitempty"`

	// conditions report the state of the KubevirtCluster; Ready summarizes
	// them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KubevirtClusterInitializationStatus follows the Cluster API v1beta2 contract.
// +kubebuilder:validation:MinProperties=1
type KubevirtClusterInitializationStatus struct {
	// provisioned is true when the infrastructure of the cluster is ready for
	// machines.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubevirtclusters,scope=Namespaced,categories=cluster-api,shortName=kvc
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this KubevirtCluster belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Whether the cluster infrastructure is ready"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Isolation",type="string",JSONPath=".status.conditions[?(@.type=='NetworkIsolationReady')].reason",description="Whether the tenant's NetworkPolicies are applied"
// +kubebuilder:printcolumn:name="Infra",type="string",JSONPath=".status.conditions[?(@.type=='InfraClusterAvailable')].reason",description="Whether the infra cluster can be used"
// +kubebuilder:printcolumn:name="Endpoint Status",type="string",JSONPath=".status.conditions[?(@.type=='ControlPlaneEndpointReady')].reason",description="The control-plane Service",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// KubevirtCluster is the infrastructure of one tenant cluster on a KubeVirt
// infra cluster.
type KubevirtCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec KubevirtClusterSpec `json:"spec,omitempty"`
	// status is the observed state.
	// +optional
	Status KubevirtClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions, for CAPI's condition utilities.
func (c *KubevirtCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions, for CAPI's condition utilities.
func (c *KubevirtCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubevirtClusterList is a list of KubevirtClusters.
type KubevirtClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &KubevirtCluster{}, &KubevirtClusterList{})
}

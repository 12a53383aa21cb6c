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

// TenantCloudComponent is a component of the tenant cluster that reaches the
// infra cluster with the credential the provider mints.
// +kubebuilder:validation:Enum=CloudControllerManager;CSIDriver
type TenantCloudComponent string

const (
	// TenantCloudControllerManager is kubevirt-cloud-controller-manager: the
	// tenant's LoadBalancer Services as infra Services, and its Nodes'
	// instances.
	TenantCloudControllerManager TenantCloudComponent = "CloudControllerManager"
	// TenantCSIDriver is kubevirt-csi-driver: the tenant's persistent
	// volumes as infra DataVolumes hot-plugged into its VMs.
	TenantCSIDriver TenantCloudComponent = "CSIDriver"
)

// TenantCloudSpec asks for an infra credential for the tenant cluster's
// KubeVirt cloud controller manager and CSI driver (docs/tenant-cloud.md).
type TenantCloudSpec struct {
	// components get a credential allowed exactly the calls they make, in
	// the namespace of the cluster's VMs. Empty (the default) mints none
	// and removes one minted before.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	Components []TenantCloudComponent `json:"components,omitempty"`

	// tokenExpirationSeconds is the lifetime asked of each token, from an
	// hour to a week (604800): a token a tenant cluster leaks stays usable
	// that long. The provider replaces it when four fifths of the lifetime
	// the API server granted have passed. Default 86400 (a day).
	// +optional
	// +kubebuilder:validation:Minimum=3600
	// +kubebuilder:validation:Maximum=604800
	TokenExpirationSeconds *int64 `json:"tokenExpirationSeconds,omitempty"`

	// infraServer is the infra API server's URL as the tenant's VMs reach
	// it. Empty means the address the provider itself uses: the kubeconfig's
	// server for an external infra cluster, else the in-cluster address of
	// the management cluster's API server.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(https://.+)?$`
	InfraServer string `json:"infraServer,omitempty"`
}

// Enabled reports whether any component asks for a credential.
func (s TenantCloudSpec) Enabled() bool { return len(s.Components) > 0 }

// DefaultTenantCloudTokenExpirationSeconds is the token lifetime asked for
// when tokenExpirationSeconds is unset.
const DefaultTenantCloudTokenExpirationSeconds = 86400

// MaxTenantCloudTokenExpirationSeconds is the longest token lifetime the
// provider asks for, whatever an object stored before the limit says.
const MaxTenantCloudTokenExpirationSeconds = 604800

// TenantCloudStatus reports the credential handed to the tenant cluster.
type TenantCloudStatus struct {
	// serviceAccount is "<namespace>/<name>" of the infra ServiceAccount the
	// credential belongs to.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// tokenExpirationTime is when the token in the tenant's Secret expires.
	// +optional
	TokenExpirationTime *metav1.Time `json:"tokenExpirationTime,omitempty"`

	// tokenRenewalTime is when the provider replaces it.
	// +optional
	TokenRenewalTime *metav1.Time `json:"tokenRenewalTime,omitempty"`
}

// The TenantCloudReady condition of a KubevirtCluster and its reasons.
const (
	// TenantCloudReadyCondition is True when the tenant cluster holds a
	// valid infra credential for its cloud components, or none is asked for.
	// It is not part of Ready: it waits for the tenant's control plane,
	// which waits for the cluster's infrastructure.
	TenantCloudReadyCondition = "TenantCloudReady"
	// CredentialIssuedReason: the tenant's Secret holds a token that is
	// not due for renewal.
	CredentialIssuedReason = "CredentialIssued" //nolint:gosec // a condition reason, not a credential
	// WaitingForTenantReason: the tenant cluster's API server cannot be
	// reached yet.
	WaitingForTenantReason = "WaitingForTenant"
	// CredentialFailedReason: the infra ServiceAccount, Role, binding or
	// token, or the tenant's Secret, could not be made; the message carries
	// the API error.
	CredentialFailedReason = "CredentialFailed" //nolint:gosec // a condition reason, not a credential
)

// TenantCloudSecretNamespace and TenantCloudSecretName name the Secret in
// the tenant cluster that holds the infra kubeconfig, under the key
// "kubeconfig", for the tenant's cloud controller manager and CSI driver.
const (
	TenantCloudSecretNamespace = "kube-system"
	TenantCloudSecretName      = "kubevirt-infra-kubeconfig" //nolint:gosec // a Secret's name, not its content
)

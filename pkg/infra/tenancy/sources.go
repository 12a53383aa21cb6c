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

package tenancy

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// ClusterSource is how a KubevirtCluster spec at path names its infra
// cluster.
func ClusterSource(spec *infrav1.KubevirtClusterSpec, path *field.Path) Source {
	return Source{SecretRef: spec.InfraClusterSecretRef, Identity: spec.IdentityRef, Path: path}
}

// ClusterRequest is the infra namespace a KubevirtCluster spec at path asks
// for its control-plane Service.
func ClusterRequest(spec *infrav1.KubevirtClusterSpec, path *field.Path) Request {
	return Request{Namespace: spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace,
		Field: path.Child("controlPlaneServiceTemplate", "metadata", "namespace")}
}

// MachineSource is how a KubevirtMachine spec at path names its infra
// cluster: by its own references, else by its KubevirtCluster's (kc may be
// nil).
func MachineSource(spec *infrav1.KubevirtMachineSpec, kc *infrav1.KubevirtCluster, path *field.Path) Source {
	if spec.InfraClusterSecretRef != nil || spec.IdentityRef != nil || kc == nil {
		return Source{SecretRef: spec.InfraClusterSecretRef, Identity: spec.IdentityRef, Path: path}
	}
	return ClusterSource(&kc.Spec, field.NewPath("KubevirtCluster", kc.Name, "spec"))
}

// MachineRequest is the infra namespace a KubevirtMachine spec at path
// asks for its VM.
func MachineRequest(spec *infrav1.KubevirtMachineSpec, path *field.Path) Request {
	return Request{Namespace: spec.VirtualMachineTemplate.ObjectMeta.Namespace,
		Field: path.Child("virtualMachineTemplate", "metadata", "namespace")}
}

// NetworksOf is the Multus networks a KubevirtCluster (nil: none) gives
// every machine.
func NetworksOf(kc *infrav1.KubevirtCluster) []infrav1.MultusNetwork {
	if kc == nil {
		return nil
	}
	return kc.Spec.Network.Networks
}

// TenantCloud refuses a tenant cloud credential (docs/tenant-cloud.md) for
// a cluster whose infra namespace is shared (Shared): the credential
// reaches every Service, VM and DataVolume of the namespace, other
// tenants' too.
// The grant's guest.tenantCloud says the namespace serves one team.
func TenantCloud(spec infrav1.TenantCloudSpec, shared bool, allow infrav1.GuestAllowances, infraNamespace string, fld *field.Path) *Refusal {
	if !spec.Enabled() || !shared || allow.TenantCloud {
		return nil
	}
	return refuse(RuleTenantCloudShared, fld,
		"infra namespace %s may hold other tenants' objects, and a tenant credential reaches all of its Services, VMs and DataVolumes; an administrator who gives it to one team only sets spec.guest.tenantCloud in its KubevirtClusterIdentity",
		infraNamespace)
}

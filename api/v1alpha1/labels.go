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

// Labels the provider puts on the VirtualMachines it creates and on their
// VMI template, so that virt-launcher pods carry them too (NetworkPolicies
// and anti-affinity select on them).
const (
	// ClusterNameLabel names the CAPI Cluster; it is CAPI's own key.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// RoleLabel is "control-plane" or "worker", as the community provider
	// sets it.
	RoleLabel = "cluster.x-k8s.io/role"
	// MachineDeploymentLabel names the MachineDeployment; CAPI's own key.
	MachineDeploymentLabel = "cluster.x-k8s.io/deployment-name"
	// MachineLabel names the CAPI Machine.
	MachineLabel = "capkv.io/machine"
	// KubevirtMachineLabel names the KubevirtMachine (also the VM's name).
	KubevirtMachineLabel = "capkv.io/kubevirt-machine"
	// KubevirtMachineNamespaceLabel is the KubevirtMachine's namespace, which
	// differs from the VM's on an external infra cluster.
	KubevirtMachineNamespaceLabel = "capkv.io/kubevirt-machine-namespace"
	// VMNameLabel is the label KubeVirt's examples and the community provider
	// use to select one VM's pods.
	VMNameLabel = "kubevirt.io/vm"
	// MachinePoolLabel names the MachinePool; CAPI's own key.
	MachinePoolLabel = "cluster.x-k8s.io/pool-name"
	// KubevirtMachinePoolLabel names the KubevirtMachinePool whose
	// VirtualMachinePool made the VM; the pool's selector.
	KubevirtMachinePoolLabel = "capkv.io/kubevirt-machine-pool"

	// RoleControlPlane and RoleWorker are the values of RoleLabel.
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// OwnerAnnotation, "<namespace>/<name>" of the KubevirtMachine, is on the
// VM, its instance template and its DataVolume templates. It identifies what
// the provider made, whatever the length of the names (label values stop at
// 63 characters).
const OwnerAnnotation = "capkv.io/owner"

// PoolOwnerAnnotation, "<namespace>/<name>" of the KubevirtMachinePool, is on
// the VirtualMachinePool, its VM template and so on every VM it makes, in
// place of OwnerAnnotation: each VM's KubevirtMachine has the VM's name, in
// the pool's namespace.
const PoolOwnerAnnotation = "capkv.io/owner-pool"

// PoolVMUIDAnnotation on a KubevirtMachine made for an instance of a
// KubevirtMachinePool is the UID of the pool's VM it stands for. KubeVirt
// reuses a pool VM's name for a later VM; the UID tells them apart.
const PoolVMUIDAnnotation = "capkv.io/pool-vm-uid"

// PoolTemplateHashAnnotation on a pool VM is the hash of the KubevirtMachinePool
// machine template it was made from; a VM whose hash differs is outdated and
// is replaced through its Machine.
const PoolTemplateHashAnnotation = "capkv.io/template-hash"

// GuardrailsAnnotation on a VM instance or DataVolume whose launcher pod
// or claim a ResourceQuota or LimitRange refused is the fingerprint of the
// namespace's quotas and limit ranges the provider last asked KubeVirt or
// CDI to retry against: setting it wakes their controllers, which back off
// for up to about 17 minutes and do not watch quotas themselves
// (docs/operations.md#quota).
const GuardrailsAnnotation = "capkv.io/guardrails"

// MachineFinalizer keeps a KubevirtMachine until its VM and everything
// created for it on the infra cluster are gone.
const MachineFinalizer = "kubevirtmachine.infrastructure.cluster.x-k8s.io"

// UserDataSecretSuffix ends the name of the Secret holding a VM's user data:
// <vm name>-userdata.
const UserDataSecretSuffix = "-userdata"

// BootstrapSentinelFile is the file Cluster API bootstrap providers write in
// the guest once bootstrapping succeeded; the guest-agent and ssh bootstrap
// checks look for it.
const BootstrapSentinelFile = "/run/cluster-api/bootstrap-success.complete"

// VLANRangeAnnotation on a per-cluster network template is the range VLANs
// are allocated from, as "first-last".
const VLANRangeAnnotation = "capkv.io/vlan-range"

// VLANAnnotation on a generated NetworkAttachmentDefinition is its VLAN.
const VLANAnnotation = "capkv.io/vlan"

// NetworkTemplateLabel on a generated NetworkAttachmentDefinition tells
// which template it was made from (a hash of the template's namespace and
// name), so VLANs are unique per template.
const NetworkTemplateLabel = "capkv.io/network-template"

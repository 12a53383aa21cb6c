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

// Package adoption recognises the VMs and user data Secrets the community
// KubeVirt provider (kubernetes-sigs/cluster-api-provider-kubevirt) made
// for a KubevirtMachine, by the labels that provider itself gives them
// (docs/kubevirt-behaviour.md#what-the-community-provider-leaves-behind),
// and computes the marks that make them this provider's. It changes
// metadata only: the VM's spec, and so its running instance, stay as they
// are.
package adoption

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// The community provider's labels on a VM and its instance template that
// name the KubevirtMachine it was made for.
const (
	CommunityMachineNameLabel      = "capk.cluster.x-k8s.io/kubevirt-machine-name"
	CommunityMachineNamespaceLabel = "capk.cluster.x-k8s.io/kubevirt-machine-namespace"
)

// AdoptedFromAnnotation marks a VM this provider adopted, with the
// provider that made it.
const AdoptedFromAnnotation = "capkv.io/adopted-from"

// CommunityProvider is AdoptedFromAnnotation's value for the community
// KubeVirt provider.
const CommunityProvider = "cluster-api-provider-kubevirt"

// communitySecretType is the type of the community provider's user data
// Secret: the bootstrap Secret's.
const communitySecretType corev1.SecretType = "cluster.x-k8s.io/secret" //nolint:gosec // a Secret type, not a credential

// Machine names the KubevirtMachine and Cluster an object must have been
// made for.
type Machine struct {
	Namespace, Name, Cluster string
}

// CommunityVM reports whether a VM carries the marks the community
// provider gives the VM of machine m: both machine labels and the cluster
// name label, and none of this provider's owner annotations. A VM that
// only shares the machine's name, or whose labels name another machine
// or cluster, is not one.
func CommunityVM(vm metav1.Object, m Machine) bool {
	l, a := vm.GetLabels(), vm.GetAnnotations()
	if _, ours := a[infrav1.OwnerAnnotation]; ours {
		return false
	}
	if _, pool := a[infrav1.PoolOwnerAnnotation]; pool {
		return false
	}
	// The community provider sets no owner: a VM owned by anything (a
	// VirtualMachinePool, another controller) is someone else's.
	return l[CommunityMachineNameLabel] == m.Name && l[CommunityMachineNamespaceLabel] == m.Namespace &&
		l[infrav1.ClusterNameLabel] == m.Cluster && m.Name != "" && m.Cluster != "" && len(vm.GetOwnerReferences()) == 0
}

// Marks are what adoption adds to a VM's metadata and its instance
// template's: the owner annotation, the identity labels this provider's
// own VMs carry, and the owner reference to the KubevirtMachine where the
// provider's VMs have one.
type Marks struct {
	Owner  string
	Labels map[string]string
	// Controller is nil where the VM gets no owner reference (another
	// namespace, an external infra cluster).
	Controller *metav1.OwnerReference
}

// MarkVM adds the marks to the VM's metadata and to its instance
// template's labels and annotations, which the next instance takes; the
// identity labels replace what the community provider set under the same
// keys. The template's labels are metadata: KubeVirt restarts nothing for
// them (docs/migrating-from-capk.md).
func MarkVM(vm *kubevirtv1.VirtualMachine, marks Marks) {
	vm.Labels = withAll(marks.Labels, vm.Labels)
	vm.Annotations = withAll(vm.Annotations, map[string]string{
		infrav1.OwnerAnnotation: marks.Owner, AdoptedFromAnnotation: CommunityProvider})
	if marks.Controller != nil && !slices.ContainsFunc(vm.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Controller != nil && *r.Controller
	}) {
		vm.OwnerReferences = append(vm.OwnerReferences, *marks.Controller)
	}
	if t := vm.Spec.Template; t != nil {
		t.ObjectMeta.Labels = withAll(marks.Labels, t.ObjectMeta.Labels)
		t.ObjectMeta.Annotations = withAll(t.ObjectMeta.Annotations, map[string]string{infrav1.OwnerAnnotation: marks.Owner})
	}
}

// Adopted reports whether the provider adopted the VM from the community
// provider.
func Adopted(vm metav1.Object) bool {
	return vm != nil && vm.GetAnnotations()[AdoptedFromAnnotation] == CommunityProvider
}

// CommunityInstance reports whether a VM instance is the one the community
// provider started: without this provider's identity labels, or marked
// with AdoptedFromAnnotation once the provider labelled it. The next
// instance comes from the adopted template, with the labels and without
// the mark.
func CommunityInstance(vmi metav1.Object) bool {
	_, ours := vmi.GetLabels()[infrav1.KubevirtMachineNamespaceLabel]
	return !ours || vmi.GetAnnotations()[AdoptedFromAnnotation] == CommunityProvider
}

// UserDataSecrets are the names of the Secrets the VM's cloud-init volumes
// read: the community provider's user data Secret among them.
func UserDataSecrets(vm *kubevirtv1.VirtualMachine) []string {
	if vm.Spec.Template == nil {
		return nil
	}
	var names []string
	for _, v := range vm.Spec.Template.Spec.Volumes {
		for _, ref := range []*corev1.LocalObjectReference{
			configDriveSecret(v.CloudInitConfigDrive), noCloudSecret(v.CloudInitNoCloud),
		} {
			if ref != nil && ref.Name != "" && !slices.Contains(names, ref.Name) {
				names = append(names, ref.Name)
			}
		}
	}
	return names
}

// CommunityUserDataName is the name the community provider gives the user
// data Secret of a machine whose bootstrap Secret is bootstrap.
func CommunityUserDataName(bootstrap string) string { return bootstrap + "-userdata" }

// CommunityUserData reports whether a Secret the VM reads is the community
// provider's user data Secret of the machine: named after the machine's
// bootstrap Secret (CommunityUserDataName), its type, the cluster's label,
// no owner and none of this provider's marks. A Secret of the cluster's
// own (its kubeconfig, its certificates) or another machine's is none:
// adopting it would have it deleted with the VM.
func CommunityUserData(secret metav1.Object, secretType corev1.SecretType, cluster, bootstrap string) bool {
	_, ours := secret.GetAnnotations()[infrav1.OwnerAnnotation]
	return secretType == communitySecretType && bootstrap != "" && secret.GetName() == CommunityUserDataName(bootstrap) &&
		secret.GetLabels()[infrav1.ClusterNameLabel] == cluster && len(secret.GetOwnerReferences()) == 0 && !ours
}

func configDriveSecret(s *kubevirtv1.CloudInitConfigDriveSource) *corev1.LocalObjectReference {
	if s == nil {
		return nil
	}
	return s.UserDataSecretRef
}

func noCloudSecret(s *kubevirtv1.CloudInitNoCloudSource) *corev1.LocalObjectReference {
	if s == nil {
		return nil
	}
	return s.UserDataSecretRef
}

// withAll returns base with the keys of extra that base lacks added; base
// is not modified.
func withAll(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range extra {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// CommunitySelector is the selector of the community provider's
// control-plane Service of cluster: the cluster's control-plane VMs.
func CommunitySelector(cluster string) map[string]string {
	return map[string]string{infrav1.ClusterNameLabel: cluster, infrav1.RoleLabel: infrav1.RoleControlPlane}
}

// CommunityService reports whether a Service is the community provider's
// control-plane Service of cluster: the cluster's label, exactly its
// selector, no owner and none of this provider's marks.
func CommunityService(svc *corev1.Service, cluster string) bool {
	_, ours := svc.Annotations[infrav1.OwnerAnnotation]
	return cluster != "" && svc.Labels[infrav1.ClusterNameLabel] == cluster && maps.Equal(svc.Spec.Selector, CommunitySelector(cluster)) &&
		len(svc.OwnerReferences) == 0 && !ours
}

// communityConditionTypes are the condition types only the community
// provider writes (v0.11.2: the KubevirtMachine's and the
// KubevirtCluster's, besides Ready).
var communityConditionTypes = []string{"VMProvisioned", "BootstrapExecSucceeded", "VMLiveMigratable", "LoadBalancerAvailable"}

// WithoutCommunityConditions returns conds without the conditions the
// community provider left on an object this provider now reconciles: its
// own types, and any condition without a reason. It writes Cluster API
// v1beta1 conditions, where a reason is optional (a True one has none);
// this provider's schema requires one, so such a condition, sent back
// with the rest of the status, would fail every status write. conds is
// returned as it is when it holds none.
func WithoutCommunityConditions(conds []metav1.Condition) []metav1.Condition {
	foreign := func(c metav1.Condition) bool {
		return c.Reason == "" || slices.Contains(communityConditionTypes, c.Type)
	}
	if !slices.ContainsFunc(conds, foreign) {
		return conds
	}
	return slices.DeleteFunc(slices.Clone(conds), foreign)
}

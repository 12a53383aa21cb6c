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

package e2e

import (
	"context"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/controllers"
)

// The owner references and finalizers every object of a cluster must
// carry, written as the maps Cluster API's resilience checks take
// (framework.ValidateOwnerReferencesResilience and friends): the checks
// remove them all, as a restore from a backup or clusterctl move does, and
// wait until the controllers have put them back. Cluster API's maps cover
// its own kinds; these cover this provider's and the Secrets and
// ConfigMaps a cluster of ours holds.

// assertOwners is the form of an owner-reference assertion.
type assertOwners = func(types.NamespacedName, []metav1.OwnerReference) error

func owner(gv, kind string, controller bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: gv, Kind: kind}
	if controller {
		ref.Controller = ptr.To(true)
	}
	return ref
}

var (
	clusterOwnerRef             = owner(clusterv1.GroupVersion.String(), "Cluster", false)
	clusterControllerRef        = owner(clusterv1.GroupVersion.String(), "Cluster", true)
	clusterClassOwnerRef        = owner(clusterv1.GroupVersion.String(), "ClusterClass", false)
	machineControllerRef        = owner(clusterv1.GroupVersion.String(), "Machine", true)
	machinePoolController       = owner(clusterv1.GroupVersion.String(), "MachinePool", true)
	kcpControllerRef            = owner(controlplanev1.GroupVersion.String(), "KubeadmControlPlane", true)
	kubeadmConfigCtrlRef        = owner(bootstrapv1.GroupVersion.String(), "KubeadmConfig", true)
	crsOwnerRef                 = owner(addonsv1.GroupVersion.String(), "ClusterResourceSet", false)
	virtualMachineOwnerRef      = owner(kubevirtv1.SchemeGroupVersion.String(), "VirtualMachine", false)
	vmPoolOwnerRef              = owner(poolv1.SchemeGroupVersion.String(), "VirtualMachinePool", false)
	kubevirtMachinePoolOwnerRef = owner(infrav1.GroupVersion.String(), "KubevirtMachinePool", false)
)

// kubeadmBootstrapOwners is framework.KubeadmBootstrapOwnerReferenceAssertions
// with one more case: the KubeadmConfig a MachinePool of a cluster without
// topology names is the user's, controlled by the MachinePool alone (the
// framework expects the Cluster too, which the topology controller adds to
// the configs it creates).
func kubeadmBootstrapOwners() map[string]assertOwners {
	assertions := maps.Clone(framework.KubeadmBootstrapOwnerReferenceAssertions)
	upstream := assertions["KubeadmConfig"]
	assertions["KubeadmConfig"] = func(obj types.NamespacedName, owners []metav1.OwnerReference) error {
		if framework.HasExactOwners(owners, machinePoolController) == nil {
			return nil
		}
		return upstream(obj, owners)
	}
	return assertions
}

// kubevirtOwnerAssertions are this provider's kinds. A KubevirtCluster of a
// ClusterClass cluster is controlled by its Cluster, as every object the
// topology controller creates.
func kubevirtOwnerAssertions(topology bool) map[string]assertOwners {
	clusterRef := clusterOwnerRef
	if topology {
		clusterRef = clusterControllerRef
	}
	return map[string]assertOwners{
		"KubevirtCluster": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, clusterRef)
		},
		"KubevirtClusterTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, clusterClassOwnerRef)
		},
		// A MachinePool's instance is also owned by its KubevirtMachinePool.
		"KubevirtMachine": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{machineControllerRef},
				[]metav1.OwnerReference{machineControllerRef, kubevirtMachinePoolOwnerRef})
		},
		"KubevirtMachineTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{clusterOwnerRef}, []metav1.OwnerReference{clusterClassOwnerRef})
		},
		// Controlled by its MachinePool alone, which Cluster API's
		// MachinePool controller sets (Cluster API's DevMachinePool also
		// has its Cluster, which its own controller adds).
		"KubevirtMachinePool": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, machinePoolController)
		},
		"KubevirtRemediationTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{}, []metav1.OwnerReference{clusterClassOwnerRef})
		},
		"KubevirtMachinePoolTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{clusterOwnerRef}, []metav1.OwnerReference{clusterClassOwnerRef})
		},
	}
}

// secretAndConfigMapOwners replaces framework.KubernetesReferenceAssertions,
// which knows only Kubeadm's Secrets: a cluster of ours also holds the
// user data Secret of each machine, owned by its VirtualMachine, and of
// each MachinePool, owned by its VirtualMachinePool, so that they go with
// what boots from them on whichever cluster that runs.
var secretAndConfigMapOwners = map[string]assertOwners{
	"Secret": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
		return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{kcpControllerRef},
			[]metav1.OwnerReference{kubeadmConfigCtrlRef}, []metav1.OwnerReference{virtualMachineOwnerRef},
			[]metav1.OwnerReference{vmPoolOwnerRef})
	},
	"ConfigMap": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
		return framework.HasExactOwners(owners, crsOwnerRef)
	},
}

// kubevirtFinalizers are the finalizers of this provider's kinds.
var kubevirtFinalizers = map[string]func(types.NamespacedName) []string{
	"KubevirtCluster": func(types.NamespacedName) []string { return []string{infrav1.ClusterFinalizer} },
	"KubevirtMachine": func(types.NamespacedName) []string { return []string{infrav1.MachineFinalizer} },
	"KubevirtMachinePool": func(types.NamespacedName) []string {
		return []string{controllers.MachinePoolFinalizer}
	},
}

// inNamespace limits the owner graph to the cluster's namespace: clusterctl's
// graph also lists the Secrets of the provider's own namespace, which belong
// to no cluster (the webhook's serving certificate), and the framework
// fetches every object of the graph in the cluster's namespace.
func inNamespace(ns string) clusterctlcluster.GetOwnerGraphFilterFunction {
	return func(u unstructured.Unstructured) bool { return u.GetNamespace() == ns }
}

// validateOwnership runs Cluster API's three resilience checks on a
// running cluster: owner references removed and rebuilt, owner references
// moved to another API version and brought back, finalizers removed and
// put back.
func validateOwnership(ctx context.Context, proxy framework.ClusterProxy, ns, name string, topology bool) {
	owners := []map[string]assertOwners{
		framework.CoreOwnerReferenceAssertion, framework.ExpOwnerReferenceAssertions,
		kubeadmBootstrapOwners(), framework.KubeadmControlPlaneOwnerReferenceAssertions(topology),
		kubevirtOwnerAssertions(topology), secretAndConfigMapOwners,
	}
	filter := inNamespace(ns)
	framework.ValidateOwnerReferencesResilience(ctx, proxy, ns, name, filter, owners...)
	framework.ValidateOwnerReferencesOnUpdate(ctx, proxy, ns, name, filter, owners...)
	core := framework.CoreFinalizersAssertionWithLegacyClusters
	if topology {
		core = framework.CoreFinalizersAssertionWithClassyClusters
	}
	framework.ValidateFinalizersResilience(ctx, proxy, ns, name, filter, core,
		framework.KubeadmControlPlaneFinalizersAssertion, framework.ExpFinalizersAssertion, kubevirtFinalizers)
}

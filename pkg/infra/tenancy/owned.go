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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

var namedKinds = map[string]schema.GroupVersionKind{
	KindSecret:                corev1.SchemeGroupVersion.WithKind("Secret"),
	KindConfigMap:             corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	KindClaim:                 corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	KindDataVolume:            {Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"},
	KindDataSource:            {Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataSource"},
	KindSnapshot:              {Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"},
	KindResourceClaim:         {Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"},
	KindResourceClaimTemplate: {Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"},
}

// CheckOwned refuses a named object of the VM's infra namespace that does
// not carry the cluster's name label (cluster.x-k8s.io/cluster-name): it
// belongs to another cluster or to nobody the tenant speaks for. In a
// shared infra namespace (Shared) the object must also name the tenant's
// namespace in capkv.io/kubevirt-machine-namespace: cluster names repeat
// across tenants. It reads only the objects' metadata, never a Secret's data; a
// missing object is refused too, as KubeVirt would start the VM once
// someone created it.
func CheckOwned(ctx context.Context, reader client.Reader, vmNamespace, tenantNamespace, clusterName string, shared bool, named []Named) (*Refusal, error) {
	want := fmt.Sprintf("%s=%s", clusterv1.ClusterNameLabel, clusterName)
	if shared {
		want += fmt.Sprintf(" and %s=%s", infrav1.KubevirtMachineNamespaceLabel, tenantNamespace)
	}
	for _, n := range named {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(namedKinds[n.Kind])
		err := reader.Get(ctx, types.NamespacedName{Namespace: vmNamespace, Name: n.Name}, obj)
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			// A kind the infra cluster does not serve (no snapshot CRDs)
			// names nothing that could be the cluster's.
			return refuse(RuleGuestObjectNotOwned, n.Field, "%s %s/%s does not exist; a VM may use only what is labelled %s",
				n.Kind, vmNamespace, n.Name, want), nil
		case err != nil:
			return nil, fmt.Errorf("reading %s %s/%s: %w", n.Kind, vmNamespace, n.Name, err)
		case obj.Labels[clusterv1.ClusterNameLabel] != clusterName,
			shared && obj.Labels[infrav1.KubevirtMachineNamespaceLabel] != tenantNamespace:
			return refuse(RuleGuestObjectNotOwned, n.Field,
				"%s %s/%s is not labelled %s: a VM may use only its own cluster's objects, unless a KubevirtClusterIdentity's spec.guest.unlabelledObjects allows others",
				n.Kind, vmNamespace, n.Name, want), nil
		}
	}
	return nil, nil
}

// VM is one VM's spec as a controller checks it before creating anything:
// what Guest refuses, then whether what it names belongs to its cluster.
type VM struct {
	Spec            *infrav1.KubevirtMachineSpec
	ClusterNetworks []infrav1.MultusNetwork
	Allow           infrav1.GuestAllowances
	// Namespace is the VM's infra namespace, TenantNamespace the
	// management namespace of the object asking for it.
	Namespace, TenantNamespace, ClusterName string
	// Shared says the infra namespace may hold others' objects (Shared).
	Shared bool
	Path   *field.Path
}

// Shared reports whether an infra namespace may hold other tenants'
// objects: on the management cluster, any but the tenant's own namespace;
// on an external infra cluster, any reached with an administrator's
// kubeconfig (secretNamespace, the provider's or another). One the
// tenant's own kubeconfig reaches is bounded by the rights it carries.
func Shared(vmNamespace, tenantNamespace string, external bool, secretNamespace string) bool {
	if external {
		return secretNamespace != tenantNamespace
	}
	return vmNamespace != tenantNamespace
}

// CheckVM returns the first refusal of the VM (the controllers report one
// reason), reading the objects it names with reader.
func CheckVM(ctx context.Context, reader client.Reader, vm VM) (*Refusal, error) {
	refusals, named := Guest(vm.Spec, vm.ClusterNetworks, vm.Namespace, vm.Shared, vm.Allow, vm.Path)
	if len(refusals) > 0 {
		return refusals[0], nil
	}
	return CheckOwned(ctx, reader, vm.Namespace, vm.TenantNamespace, vm.ClusterName, vm.Shared, named)
}

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

// Package tenantcloud builds the least-privilege access that a tenant
// cluster's KubeVirt cloud controller manager and CSI driver need on the
// infra cluster: exactly the calls their code makes, in the namespace of
// the cluster's VMs, and nothing cluster-scoped
// (docs/kubevirt-behaviour.md#infra-permissions-of-the-tenants-cloud-provider-and-csi-driver).
// It mints that access as a ServiceAccount, a binding to one of the
// ClusterRoles shipped with the provider (config/tenantcloud) and an
// expiring token, hands it to the tenant cluster as a kubeconfig Secret,
// replaces the token before it expires and removes it all again.
package tenantcloud

import (
	"cmp"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Component is a tenant cluster component that reaches the infra cluster.
type Component = infrav1.TenantCloudComponent

const (
	// CloudControllerManager is kubevirt-cloud-controller-manager: infra
	// Services for the tenant's LoadBalancer Services, with their
	// EndpointSlices, and the instances behind its Nodes.
	CloudControllerManager = infrav1.TenantCloudControllerManager
	// CSIDriver is kubevirt-csi-driver: infra DataVolumes hot-plugged into
	// the VMs as the tenant's persistent volumes, their expansion and
	// snapshots.
	CSIDriver = infrav1.TenantCSIDriver
)

// access is one resource (or subresource) of one API group, and the verbs
// a component calls on it.
type access struct {
	group, resource string
	verbs           []string
}

// needs are the calls each component's code makes on the infra cluster, as
// read in cloud-provider-kubevirt v0.6.0 and csi-driver 27b52aa2 (the
// sources per line are in the doc this package names).
var needs = map[Component][]access{
	CloudControllerManager: {
		{"", "services", []string{"get", "list", "watch", "create", "update", "delete"}},
		{"kubevirt.io", "virtualmachineinstances", []string{"get", "list"}},
		{"discovery.k8s.io", "endpointslices", []string{"list", "watch", "create", "update", "delete"}},
	},
	CSIDriver: {
		{"cdi.kubevirt.io", "datavolumes", []string{"get", "create", "delete"}},
		{"kubevirt.io", "virtualmachineinstances", []string{"get", "list"}},
		{"kubevirt.io", "virtualmachines", []string{"get"}},
		{"subresources.kubevirt.io", "virtualmachines/addvolume", []string{"update"}},
		{"subresources.kubevirt.io", "virtualmachines/removevolume", []string{"update"}},
		{"subresources.kubevirt.io", "virtualmachineinstances/removevolume", []string{"update"}},
		{"", "persistentvolumeclaims", []string{"get", "patch"}},
		{"snapshot.storage.k8s.io", "volumesnapshots", []string{"get", "list", "create", "delete"}},
	},
}

// Rules are the permissions components need together: one rule per API
// group and resource, verbs merged, in a stable order so that a Role built
// from them only changes when the needs do.
func Rules(components ...Component) []rbacv1.PolicyRule {
	verbs := map[[2]string][]string{}
	for _, c := range components {
		for _, a := range needs[c] {
			key := [2]string{a.group, a.resource}
			for _, v := range a.verbs {
				if !slices.Contains(verbs[key], v) {
					verbs[key] = append(verbs[key], v)
				}
			}
		}
	}
	keys := make([][2]string, 0, len(verbs))
	for k := range verbs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	rules := make([]rbacv1.PolicyRule, 0, len(keys))
	for _, k := range keys {
		v := slices.Clone(verbs[k])
		slices.Sort(v)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k[0]}, Resources: []string{k[1]}, Verbs: v})
	}
	return rules
}

// ClusterRolePrefix begins the name of every ClusterRole the provider
// binds: the release's name prefix (config/default) and "tenant-".
const ClusterRolePrefix = "capkv-tenant-"

// roleSuffix names each component in its ClusterRole's name.
var roleSuffix = map[Component]string{CloudControllerManager: "ccm", CSIDriver: "csi"}

// ClusterRoleName names the shipped ClusterRole that grants components
// together what they need (config/tenantcloud/roles), whatever their order
// or repetition: a binding names a single role.
func ClusterRoleName(components ...Component) string {
	var suffixes []string
	for _, c := range []Component{CloudControllerManager, CSIDriver} {
		if slices.Contains(components, c) {
			suffixes = append(suffixes, roleSuffix[c])
		}
	}
	return ClusterRolePrefix + strings.Join(suffixes, "-")
}

// ComponentSets are the sets of components a cluster may ask for, one
// shipped ClusterRole each.
func ComponentSets() [][]Component {
	return [][]Component{{CloudControllerManager}, {CSIDriver}, {CloudControllerManager, CSIDriver}}
}

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

package tenantcloud

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// flat writes rules as "group/resource: verbs" lines, for comparing.
func flat(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%s/%s: %s", strings.Join(r.APIGroups, ","), strings.Join(r.Resources, ","), strings.Join(r.Verbs, ",")))
	}
	return out
}

func TestRules(t *testing.T) {
	ccm := []string{
		"/services: create,delete,get,list,update,watch",
		"discovery.k8s.io/endpointslices: create,delete,list,update,watch",
		"kubevirt.io/virtualmachineinstances: get,list",
	}
	csi := []string{
		"/persistentvolumeclaims: get,patch",
		"cdi.kubevirt.io/datavolumes: create,delete,get",
		"kubevirt.io/virtualmachineinstances: get,list",
		"kubevirt.io/virtualmachines: get",
		"snapshot.storage.k8s.io/volumesnapshots: create,delete,get,list",
		"subresources.kubevirt.io/virtualmachineinstances/removevolume: update",
		"subresources.kubevirt.io/virtualmachines/addvolume: update",
		"subresources.kubevirt.io/virtualmachines/removevolume: update",
	}
	for _, tc := range []struct {
		name       string
		components []Component
		want       []string
	}{
		{name: "nothing", want: nil},
		{name: "cloud controller manager", components: []Component{CloudControllerManager}, want: ccm},
		{name: "CSI driver", components: []Component{CSIDriver}, want: csi},
		{name: "both, merged: one rule for the instances both read", components: []Component{CSIDriver, CloudControllerManager}, want: []string{
			"/persistentvolumeclaims: get,patch",
			"/services: create,delete,get,list,update,watch",
			"cdi.kubevirt.io/datavolumes: create,delete,get",
			"discovery.k8s.io/endpointslices: create,delete,list,update,watch",
			"kubevirt.io/virtualmachineinstances: get,list",
			"kubevirt.io/virtualmachines: get",
			"snapshot.storage.k8s.io/volumesnapshots: create,delete,get,list",
			"subresources.kubevirt.io/virtualmachineinstances/removevolume: update",
			"subresources.kubevirt.io/virtualmachines/addvolume: update",
			"subresources.kubevirt.io/virtualmachines/removevolume: update",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flat(Rules(tc.components...)); !slices.Equal(got, tc.want) {
				t.Errorf("Rules(%v) =\n%s\nwant\n%s", tc.components, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRulesAreLeast checks what no rule may grant: wildcards, Secrets,
// nodes or anything else cluster-scoped, and the verbs that would let the
// tenant widen or escalate its access.
func TestRulesAreLeast(t *testing.T) {
	forbiddenResources := []string{"*", "secrets", "nodes", "persistentvolumes", "namespaces", "roles", "rolebindings", "serviceaccounts", "pods"}
	forbiddenVerbs := []string{"*", "deletecollection", "escalate", "bind", "impersonate"}
	for _, r := range Rules(CloudControllerManager, CSIDriver) {
		for _, res := range r.Resources {
			if slices.Contains(forbiddenResources, res) {
				t.Errorf("rule %v grants %s", r, res)
			}
		}
		for _, v := range r.Verbs {
			if slices.Contains(forbiddenVerbs, v) {
				t.Errorf("rule %v grants verb %s", r, v)
			}
		}
		if slices.Contains(r.APIGroups, "*") || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %v is not a plain namespaced rule", r)
		}
	}
}

func TestRole(t *testing.T) {
	r := Role("tenant-cloud", "vms", CSIDriver)
	if r.Name != "tenant-cloud" || r.Namespace != "vms" || r.Kind != "Role" || len(r.Rules) != len(Rules(CSIDriver)) {
		t.Errorf("Role = %+v", r)
	}
	// Each call builds its own rules: changing one Role leaves the next.
	r.Rules[0].Verbs[0] = "changed"
	if Rules(CSIDriver)[0].Verbs[0] == "changed" {
		t.Error("Rules shares its verb slices between calls")
	}
}

// TestProviderHoldsWhatItGrants checks the provider's generated ClusterRole
// against the Role it creates: Kubernetes lets a Role grant only what its
// creator holds, and the test world's API servers run the provider as an
// administrator in most suites, where a gap would not show.
func TestProviderHoldsWhatItGrants(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	held := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, held); err != nil {
		t.Fatal(err)
	}
	holds := func(group, resource, verb string) bool {
		return slices.ContainsFunc(held.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, r := range Rules(CloudControllerManager, CSIDriver) {
		for _, resource := range r.Resources {
			for _, verb := range r.Verbs {
				if !holds(r.APIGroups[0], resource, verb) {
					t.Errorf("the provider's ClusterRole lacks %s on %s/%s, which the tenant cloud Role grants", verb, r.APIGroups[0], resource)
				}
			}
		}
	}
}

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

func TestClusterRoleName(t *testing.T) {
	for _, tc := range []struct {
		components []Component
		want       string
	}{
		{[]Component{CloudControllerManager}, "capkv-tenant-ccm"},
		{[]Component{CSIDriver}, "capkv-tenant-csi"},
		{[]Component{CloudControllerManager, CSIDriver}, "capkv-tenant-ccm-csi"},
		{[]Component{CSIDriver, CloudControllerManager, CSIDriver}, "capkv-tenant-ccm-csi"},
	} {
		if got := ClusterRoleName(tc.components...); got != tc.want {
			t.Errorf("ClusterRoleName(%v) = %s, want %s", tc.components, got, tc.want)
		}
	}
}

// readYAML decodes the objects of a multi-document YAML file in the
// repository into T.
func readYAML[T any](t *testing.T, path ...string) []T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"..", "..", ".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var o T
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// TestShippedClusterRoles checks the ClusterRoles the release installs
// against the calls each set of components makes, and their names (with
// the release's prefix) against those the provider binds.
func TestShippedClusterRoles(t *testing.T) {
	shipped := readYAML[rbacv1.ClusterRole](t, "config", "tenantcloud", "roles", "roles.yaml")
	kustomization, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSuffix(ClusterRolePrefix, "tenant-")
	if !strings.Contains(string(kustomization), "\nnamePrefix: "+prefix+"\n") {
		t.Fatalf("config/default does not prefix names with %s", prefix)
	}
	if len(shipped) != len(ComponentSets()) {
		t.Errorf("%d ClusterRoles shipped, want one per component set (%d)", len(shipped), len(ComponentSets()))
	}
	for _, set := range ComponentSets() {
		name := strings.TrimPrefix(ClusterRoleName(set...), prefix)
		i := slices.IndexFunc(shipped, func(r rbacv1.ClusterRole) bool { return r.Name == name })
		if i < 0 {
			t.Errorf("no ClusterRole %s shipped for %v", name, set)
			continue
		}
		if got, want := flat(shipped[i].Rules), flat(Rules(set...)); !slices.Equal(got, want) {
			t.Errorf("ClusterRole %s grants\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestProviderBindsWhatItGrants checks the provider's generated ClusterRole:
// it may bind the shipped roles and nothing else, and it can no longer make
// a Role of its own, so it need not hold what the tenant gets.
func TestProviderBindsWhatItGrants(t *testing.T) {
	held := readYAML[rbacv1.ClusterRole](t, "config", "rbac", "role.yaml")[0]
	var bindable []string
	for _, r := range held.Rules {
		if slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			if !slices.Equal(r.APIGroups, []string{rbacv1.GroupName}) || !slices.Equal(r.Resources, []string{"clusterroles"}) || len(r.ResourceNames) == 0 {
				t.Errorf("rule %v may bind or escalate beyond the shipped ClusterRoles", r)
			}
			bindable = append(bindable, r.ResourceNames...)
		}
		if slices.Contains(r.Resources, "roles") && (slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "update")) {
			t.Errorf("rule %v lets the provider write Roles", r)
		}
	}
	var want []string
	for _, set := range ComponentSets() {
		want = append(want, ClusterRoleName(set...))
	}
	slices.Sort(bindable)
	slices.Sort(want)
	if !slices.Equal(bindable, want) {
		t.Errorf("the provider may bind %v, want %v", bindable, want)
	}
}

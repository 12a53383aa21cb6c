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

package webhooks_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// documentedVariables reads the variable table of docs/flavors.md.
func documentedVariables(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "docs", "flavors.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	vars := map[string]bool{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if cell, ok := strings.CutPrefix(sc.Text(), "| `"); ok {
			name, _, _ := strings.Cut(cell, "`")
			vars[name] = true
		}
	}
	return vars
}

// TestClusterTemplates renders every flavor of templates/flavors/ (as make
// generate wrote it into templates/) and the ClusterClass the way clusterctl
// does, with only the required variables, and checks that every variable is
// documented, that the API server (schemas) and the provider's webhooks
// accept every object, in a dry run so no controller acts on them, and that
// every object a flavor names is in it. A flavor without an entry in
// wantKinds (a new one) gets every check but the count of its kinds.
func TestClusterTemplates(t *testing.T) {
	// Every flavor carries the CNI's ClusterResourceSet and manifests.
	cni := map[string]int{"ClusterResourceSet": 1, "ConfigMap": 1}
	plain := map[string]int{"Cluster": 1, "KubevirtCluster": 1, "KubevirtMachineTemplate": 2, "KubeadmControlPlane": 1,
		"KubeadmConfigTemplate": 1, "MachineDeployment": 1}
	// The cloud flavors add a ClusterResourceSet and its manifests per
	// component (docs/tenant-cloud.md).
	withAddons := func(n int) map[string]int {
		out := maps.Clone(plain)
		out["ClusterResourceSet"], out["ConfigMap"] = n, n
		return out
	}
	// The objects each flavor is made of, by the file of templates/; the
	// CNI's come on top.
	wantKinds := map[string]map[string]int{
		"cluster-template-cloud-provider.yaml":     withAddons(1),
		"cluster-template-cloud-provider-csi.yaml": withAddons(2),
		"cluster-template.yaml":                    plain,
		"cluster-template-external-infra.yaml":     plain,
		"cluster-template-gpu.yaml":                plain,
		"cluster-template-ignition.yaml":           plain,
		"cluster-template-multus.yaml":             plain,
		"cluster-template-multus-ipam.yaml":        plain,
		"cluster-template-nodeport.yaml":           plain,
		"cluster-template-performance.yaml":        plain,
		"cluster-template-persistent-storage.yaml": plain,
		"cluster-template-topology.yaml":           {"Cluster": 1},
		"cluster-template-machinepool.yaml": {"Cluster": 1, "KubevirtCluster": 1, "KubevirtMachineTemplate": 1, "KubeadmControlPlane": 1,
			"KubevirtMachinePool": 1, "KubeadmConfig": 1, "MachinePool": 1},
		"clusterclass-kubevirt.yaml": {"ClusterClass": 1, "KubevirtClusterTemplate": 1, "KubevirtMachineTemplate": 3,
			"KubevirtMachinePoolTemplate": 1, "KubeadmControlPlaneTemplate": 1, "KubeadmConfigTemplate": 3},
	}
	flavors, err := testenv.Flavors()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	rendered := map[string]bool{}
	for _, flavor := range flavors {
		files = append(files, testenv.FlavorTemplate(flavor))
		rendered[filepath.Base(testenv.FlavorTemplate(flavor))] = true
	}
	classes, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "templates", "clusterclass-*.yaml"))
	if err != nil || len(classes) == 0 {
		t.Fatalf("no ClusterClass in templates/: %v", err)
	}
	files = append(files, classes...)
	// templates/ holds the rendered flavors and the ClusterClasses, nothing
	// else: a cluster-template*.yaml without an overlay would ship untested.
	all, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "templates", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if !rendered[filepath.Base(f)] && !slices.Contains(classes, f) {
			t.Errorf("%s is neither the rendering of a directory of %s nor a ClusterClass (make generate removes a stale flavor)", f, testenv.FlavorsDir)
		}
	}
	for name := range wantKinds {
		if !rendered[name] && !slices.Contains(classes, filepath.Join(testenv.RepoRoot(), "templates", name)) {
			t.Errorf("wantKinds names %s, which no flavor of %s renders", name, testenv.FlavorsDir)
		}
	}
	documented := documentedVariables(t)
	for _, file := range files {
		name := filepath.Base(file)
		want, known := wantKinds[name]
		if rendered[name] {
			want = maps.Clone(want)
			if want == nil {
				want = map[string]int{}
			}
			for kind, n := range cni {
				want[kind] += n
			}
		}
		t.Run(name, func(t *testing.T) {
			objs := renderAndDryRun(t, file, documented)
			kinds := map[string]int{}
			for _, u := range objs {
				kinds[u.GetKind()]++
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}
			if rendered[name] {
				checkComplete(t, objs)
			} else if !known {
				t.Errorf("no kinds expected of %s: add its entry to wantKinds", name)
			}
		})
	}
}

// The references by which a cluster's objects name each other, by the kind
// that holds them: each must name an object of the same flavor.
var flavorReferences = map[string][][]string{
	"Cluster":             {{"spec", "infrastructureRef"}, {"spec", "controlPlaneRef"}},
	"KubeadmControlPlane": {{"spec", "machineTemplate", "spec", "infrastructureRef"}},
	"MachineDeployment":   {{"spec", "template", "spec", "bootstrap", "configRef"}, {"spec", "template", "spec", "infrastructureRef"}},
	"MachinePool":         {{"spec", "template", "spec", "bootstrap", "configRef"}, {"spec", "template", "spec", "infrastructureRef"}},
}

// checkComplete checks what every flavor, whatever makes it, must be: one
// Cluster, either of a ClusterClass templates/ carries (clusterctl adds it)
// or with an infrastructure and a control plane, and every object the
// Cluster, its control plane and its machine sets name in the same flavor.
func checkComplete(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	have := map[string]bool{}
	for _, u := range objs {
		have[u.GetKind()+"/"+u.GetName()] = true
	}
	clusters := 0
	for _, u := range objs {
		if u.GetKind() == "Cluster" {
			clusters++
			class, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name")
			if class != "" {
				if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "templates", "clusterclass-"+class+".yaml")); err != nil {
					t.Errorf("Cluster %s is of ClusterClass %s, which templates/ does not carry: %v", u.GetName(), class, err)
				}
				continue
			}
			for _, field := range []string{"infrastructureRef", "controlPlaneRef"} {
				if _, found, _ := unstructured.NestedMap(u.Object, "spec", field); !found {
					t.Errorf("Cluster %s has neither a topology nor spec.%s", u.GetName(), field)
				}
			}
		}
		for _, path := range flavorReferences[u.GetKind()] {
			ref, found, err := unstructured.NestedStringMap(u.Object, path...)
			if err != nil {
				t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				continue
			}
			if !found {
				continue
			}
			if !have[ref["kind"]+"/"+ref["name"]] {
				t.Errorf("%s %s names %s %s in %s, which the flavor does not make", u.GetKind(), u.GetName(),
					ref["kind"], ref["name"], strings.Join(path, "."))
			}
		}
	}
	if clusters != 1 {
		t.Errorf("%d Clusters, want 1", clusters)
	}
}

// renderAndDryRun renders a template with only CLUSTER_NAME and NAMESPACE,
// creates each object in a dry run and returns the objects.
func renderAndDryRun(t *testing.T, file string, documented map[string]bool) []*unstructured.Unstructured {
	raw, err := testenv.ReadTemplate(file)
	if err != nil {
		t.Fatal(err)
	}
	p := yamlprocessor.NewSimpleProcessor()
	vars, err := p.GetVariables(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if !documented[v] {
			t.Errorf("variable %s is not documented in docs/flavors.md", v)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "flavor-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	given := map[string]string{"CLUSTER_NAME": "blue", "NAMESPACE": ns.Name}
	out, err := p.Process(raw, func(name string) (string, error) {
		if v, ok := given[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	if err != nil {
		t.Fatalf("rendering with only CLUSTER_NAME and NAMESPACE: %v", err)
	}
	objs := decodeObjects(t, out)
	for _, u := range objs {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns.Name)
		}
		if err := env.Client.Create(context.Background(), u.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("%s %s refused: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return objs
}

// decodeObjects reads the objects of a multi-document YAML file.
func decodeObjects(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

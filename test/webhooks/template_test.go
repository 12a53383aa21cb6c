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

// TestClusterTemplates renders every flavor in templates/ and the
// ClusterClass the way clusterctl does, with only the required variables,
// and checks that every variable is documented and that the API server
// (schemas) and the provider's webhooks accept every object, in a dry run
// so no controller acts on them.
func TestClusterTemplates(t *testing.T) {
	// Every flavor carries the CNI's ClusterResourceSet and manifests.
	cni := map[string]int{"ClusterResourceSet": 1, "ConfigMap": 1}
	plain := map[string]int{"Cluster": 1, "KubevirtCluster": 1, "KubevirtMachineTemplate": 2, "KubeadmControlPlane": 1,
		"KubeadmConfigTemplate": 1, "MachineDeployment": 1}
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "templates", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("templates: %v %v", files, err)
	}
	documented := documentedVariables(t)
	for _, file := range files {
		want := plain
		switch filepath.Base(file) {
		case "cluster-template-topology.yaml":
			want = map[string]int{"Cluster": 1}
		case "cluster-template-machinepool.yaml":
			want = map[string]int{"Cluster": 1, "KubevirtCluster": 1, "KubevirtMachineTemplate": 1, "KubeadmControlPlane": 1,
				"KubevirtMachinePool": 1, "KubeadmConfig": 1, "MachinePool": 1}
		case "clusterclass-kubevirt.yaml":
			want = map[string]int{"ClusterClass": 1, "KubevirtClusterTemplate": 1, "KubevirtMachineTemplate": 3,
				"KubevirtMachinePoolTemplate": 1, "KubeadmControlPlaneTemplate": 1, "KubeadmConfigTemplate": 1}
		}
		if strings.HasPrefix(filepath.Base(file), "cluster-template") {
			want = maps.Clone(want)
			maps.Copy(want, cni)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			kinds := renderAndDryRun(t, file, documented)
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}
		})
	}
}

// renderAndDryRun renders a template with only CLUSTER_NAME and NAMESPACE,
// creates each object in a dry run and counts the kinds.
func renderAndDryRun(t *testing.T, file string, documented map[string]bool) map[string]int {
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
	kinds := map[string]int{}
	for _, u := range decodeObjects(t, out) {
		kinds[u.GetKind()]++
		if u.GetNamespace() == "" {
			u.SetNamespace(ns.Name)
		}
		if err := env.Client.Create(context.Background(), u, client.DryRunAll); err != nil {
			t.Errorf("%s %s refused: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return kinds
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

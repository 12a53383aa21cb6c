// Package release checks the manifests clusterctl installs:
// out/infrastructure-components.yaml (make release-manifests) and
// metadata.yaml.
package release

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

const providerLabel = "cluster.x-k8s.io/provider"

// components returns out/infrastructure-components.yaml, building it with
// make when it is missing.
func components(t *testing.T) []byte {
	t.Helper()
	root := testenv.RepoRoot()
	path := filepath.Join(root, "out", "infrastructure-components.yaml")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		cmd := exec.Command("make", "release-manifests")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make release-manifests: %v\n%s", err, out)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// objects processes the manifest as clusterctl does (every variable takes
// its default) and splits it into objects.
func objects(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	processed, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		return "", fmt.Errorf("variable %s is not set", name)
	})
	if err != nil {
		t.Fatalf("clusterctl could not process the manifest with defaults alone: %v", err)
	}
	if bytes.Contains(processed, []byte("${")) {
		t.Fatal("a ${...} survived clusterctl's processing")
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(processed), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func TestInfrastructureComponents(t *testing.T) {
	raw := components(t)
	vars, err := yamlprocessor.NewSimpleProcessor().GetVariableMap(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, def := range vars {
		if def == nil {
			t.Errorf("variable %s has no default; clusterctl init would fail without it", name)
		}
		if !strings.HasPrefix(name, "CAPKV_") {
			t.Errorf("variable %s is not namespaced with CAPKV_", name)
		}
	}

	objs := objects(t, raw)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetLabels()[providerLabel] != "infrastructure-kubevirt" {
			t.Errorf("%s %s lacks label %s=infrastructure-kubevirt", o.GetKind(), o.GetName(), providerLabel)
		}
		switch o.GetKind() {
		case "CustomResourceDefinition":
			for _, contract := range []string{"cluster.x-k8s.io/v1beta1", "cluster.x-k8s.io/v1beta2"} {
				if o.GetLabels()[contract] != "v1alpha1" {
					t.Errorf("CRD %s: label %s = %q, want v1alpha1", o.GetName(), contract, o.GetLabels()[contract])
				}
			}
		case "Deployment":
			checkDeployment(t, o)
		case "ClusterRole", "Role":
			checkLeastPrivilege(t, o)
		}
	}
	if kinds["Namespace"] != 1 {
		t.Errorf("%d Namespaces, want exactly 1", kinds["Namespace"])
	}
	if kinds["CustomResourceDefinition"] != 4 {
		t.Errorf("%d CRDs, want 4", kinds["CustomResourceDefinition"])
	}
	for _, k := range []string{"Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Certificate", "Issuer", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the manifest", k)
		}
	}
}

func checkDeployment(t *testing.T, o *unstructured.Unstructured) {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
		t.Fatal(err)
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 || containers[0].Name != "manager" {
		t.Fatalf("Deployment %s: want one container named manager, got %d", d.Name, len(containers))
	}
	args := strings.Join(containers[0].Args, " ")
	for _, want := range []string{"--leader-elect", "--diagnostics-address=:8443", "--v=2"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %q after defaults", args, want)
		}
	}
}

func checkLeastPrivilege(t *testing.T, o *unstructured.Unstructured) {
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups} {
			for _, v := range list {
				if v == "*" {
					t.Errorf("%s %s has a wildcard rule: %+v", o.GetKind(), o.GetName(), r)
				}
			}
		}
	}
}

func TestMetadata(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(data, md); err != nil {
		t.Fatal(err)
	}
	rs := md.GetReleaseSeriesForVersion(mustSemver(t, "0.1.0"))
	if rs == nil || rs.Contract != "v1beta2" {
		t.Fatalf("release series 0.1 maps to %+v, want contract v1beta2", rs)
	}
}

func mustSemver(t *testing.T, v string) *version.Version {
	t.Helper()
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

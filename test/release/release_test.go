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

// Package release checks what a release ships: the manifests clusterctl
// installs (infrastructure-components.yaml from make release-manifests, and
// metadata.yaml) and the manager binary the image is built from.
package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

const providerLabel = "cluster.x-k8s.io/provider"

const (
	// releaseVersion is the VERSION the tests release; metadata.yaml must
	// have its release series.
	releaseVersion = "v0.2.0"
	// releaseImage is the IMG TestInfrastructureComponents releases with: a
	// registry with a port and a pre-release tag, the hardest name to split.
	releaseImage = "registry.example.com:5000/capkv/manager:v0.2.0-rc.1"
	// defaultImage is the IMG the Makefile derives from releaseVersion.
	defaultImage = "ghcr.io/capkv/cluster-api-provider-kubevirt:" + releaseVersion
)

// makeEnv is the test's environment without what an outer make (make test)
// or the shell could pass down and so override the variables a test sets.
func makeEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL", "VERSION", "IMG", "IMG_REPO", "RELEASE_DIR", "IMAGE_DIR", "IMAGE_PLATFORMS", "RELEASE_VERSION":
			return true
		}
		return false
	})
}

// sourceManifests reads the kustomize sources release-manifests builds from,
// to check that releasing leaves them as they were.
func sourceManifests(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range []string{"config/default", "config/manager"} {
		entries, err := os.ReadDir(filepath.Join(testenv.RepoRoot(), dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
			if err != nil {
				t.Fatal(err)
			}
			files[path] = string(data)
		}
	}
	return files
}

// releaseManifests runs make release-manifests with the given variables
// (NAME=value) into a temporary RELEASE_DIR and returns that directory.
func releaseManifests(t *testing.T, vars ...string) string {
	t.Helper()
	dir := t.TempDir()
	before := sourceManifests(t)
	out, err := runMake(append([]string{"RELEASE_DIR=" + dir}, vars...)...)
	if err != nil {
		t.Fatalf("make release-manifests %s: %v\n%s", strings.Join(vars, " "), err, out)
	}
	if after := sourceManifests(t); !maps.Equal(before, after) {
		t.Error("make release-manifests changed files in config/default or config/manager")
	}
	return dir
}

func runMake(vars ...string) ([]byte, error) {
	cmd := exec.Command("make", append([]string{"--no-print-directory", "release-manifests"}, vars...)...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = makeEnv()
	return cmd.CombinedOutput()
}

// released returns the files named of a release as releaseVersion with
// the manager image releaseImage.
func released(t *testing.T, names ...string) [][]byte {
	t.Helper()
	dir := releaseManifests(t, "VERSION="+releaseVersion, "IMG="+releaseImage)
	var out [][]byte
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// imageField matches every image: with a value, in any object.
var imageField = regexp.MustCompile(`(?m)^[ \t-]*image:[ \t]+["']?([^\s"']+)`)

// checkImages fails when an image in the manifest is a development build
// (:dev) or the placeholder of config/manager.
func checkImages(t *testing.T, raw []byte) {
	t.Helper()
	for _, m := range imageField.FindAllSubmatch(raw, -1) {
		image := string(m[1])
		if strings.HasSuffix(image, ":dev") || strings.HasPrefix(image, "controller:") || image == "controller" {
			t.Errorf("image %s in the released manifest", image)
		}
	}
	if bytes.Contains(raw, []byte(":dev")) {
		t.Error("the released manifest mentions :dev")
	}
}

// deploymentImages returns the images of the Deployments' containers.
func deploymentImages(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var images []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			t.Fatal(err)
		}
		for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
			images = append(images, c.Image)
		}
	}
	return images
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
	files := released(t, "infrastructure-components.yaml", "tenant-cloud-roles.yaml", "monitoring.yaml", "capkv-dashboard.json")
	raw := files[0]
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

	checkImages(t, raw)

	objs := objects(t, raw)
	if images := deploymentImages(t, objs); !slices.Equal(images, []string{releaseImage}) {
		t.Errorf("Deployment images %q, want [%s] (IMG)", images, releaseImage)
	}
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
	checkTenantCloudRoles(t, objs, objects(t, files[1]))
	checkMonitoring(t, objects(t, files[2]), files[3])
	if kinds["Namespace"] != 1 {
		t.Errorf("%d Namespaces, want exactly 1", kinds["Namespace"])
	}
	if kinds["CustomResourceDefinition"] != 9 {
		t.Errorf("%d CRDs, want 9", kinds["CustomResourceDefinition"])
	}
	for _, k := range []string{"Deployment", "PodDisruptionBudget", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Certificate", "Issuer", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the manifest", k)
		}
	}
}

// checkMonitoring checks the monitoring artifacts for clusters with the
// Prometheus Operator (docs/observability.md): the Service, ServiceMonitor,
// alerts and the RBAC that lets Prometheus discover and read the metrics,
// in the provider's namespace; and the dashboard, as JSON.
func checkMonitoring(t *testing.T, objs []*unstructured.Unstructured, dashboard []byte) {
	t.Helper()
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetLabels()[providerLabel] != "infrastructure-kubevirt" {
			t.Errorf("monitoring.yaml: %s %s lacks label %s", o.GetKind(), o.GetName(), providerLabel)
		}
		namespaced := !strings.HasPrefix(o.GetKind(), "Cluster")
		if namespaced && o.GetNamespace() != "capkv-system" {
			t.Errorf("monitoring.yaml: %s %s in namespace %q, want capkv-system", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	want := map[string]int{"Service": 1, "ServiceMonitor": 1, "PrometheusRule": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1}
	if !maps.Equal(kinds, want) {
		t.Errorf("monitoring.yaml holds %v, want %v", kinds, want)
	}
	// Each binding names its role as kustomize renamed it, for the service
	// account kube-prometheus runs its Prometheus as.
	names := map[string]bool{}
	for _, o := range objs {
		names[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.GetKind(), "Binding") {
			continue
		}
		ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		if !names[kind+"/"+ref] {
			t.Errorf("monitoring.yaml: %s %s binds %s %s, which it does not hold", o.GetKind(), o.GetName(), kind, ref)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "monitoring" || subjects[0].(map[string]any)["name"] != "prometheus-k8s" {
			t.Errorf("monitoring.yaml: %s %s binds %v, want monitoring/prometheus-k8s", o.GetKind(), o.GetName(), subjects)
		}
	}
	var board map[string]any
	if err := json.Unmarshal(dashboard, &board); err != nil || board["panels"] == nil {
		t.Errorf("capkv-dashboard.json is not a dashboard with panels: %v", err)
	}
}

// checkTenantCloudRoles checks that the components install the
// ClusterRoles the provider binds for tenant credentials, and that
// tenant-cloud-roles.yaml, for external infra clusters, holds the same and
// nothing else.
func checkTenantCloudRoles(t *testing.T, components, standalone []*unstructured.Unstructured) {
	t.Helper()
	rules := func(objs []*unstructured.Unstructured, name string) string {
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && o.GetName() == name {
				r, _, _ := unstructured.NestedSlice(o.Object, "rules")
				return fmt.Sprint(r)
			}
		}
		return ""
	}
	if len(standalone) != len(tenantcloud.ComponentSets()) {
		t.Errorf("tenant-cloud-roles.yaml holds %d objects, want %d ClusterRoles", len(standalone), len(tenantcloud.ComponentSets()))
	}
	for _, o := range standalone {
		if o.GetLabels()[providerLabel] != "infrastructure-kubevirt" {
			t.Errorf("tenant-cloud-roles.yaml: %s %s lacks label %s", o.GetKind(), o.GetName(), providerLabel)
		}
	}
	for _, set := range tenantcloud.ComponentSets() {
		name := tenantcloud.ClusterRoleName(set...)
		inComponents, alone := rules(components, name), rules(standalone, name)
		if inComponents == "" || inComponents != alone {
			t.Errorf("ClusterRole %s: in the components %q, in tenant-cloud-roles.yaml %q; want the same, present", name, inComponents, alone)
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
	if r := d.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("Deployment %s: replicas %v, want 2 (a leader and a warm standby)", d.Name, r)
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

// TestReleaseImage releases without IMG, where the image follows VERSION,
// and with an image by digest.
func TestReleaseImage(t *testing.T) {
	const digest = "ghcr.io/capkv/cluster-api-provider-kubevirt@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		vars []string
		want string
	}{
		{name: "default", vars: []string{"VERSION=" + releaseVersion}, want: defaultImage},
		{name: "digest", vars: []string{"VERSION=" + releaseVersion, "IMG=" + digest}, want: digest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := releaseManifests(t, tc.vars...)
			raw, err := os.ReadFile(filepath.Join(dir, "infrastructure-components.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			checkImages(t, raw)
			if images := deploymentImages(t, objects(t, raw)); !slices.Equal(images, []string{tc.want}) {
				t.Errorf("Deployment images %q, want [%s]", images, tc.want)
			}
			// The released metadata.yaml must cover the released version.
			checkSeries(t, filepath.Join(dir, "metadata.yaml"), releaseVersion)
		})
	}
}

// TestReleaseNeedsSeries: make release-manifests refuses a version
// metadata.yaml has no release series for, since clusterctl would refuse it.
func TestReleaseNeedsSeries(t *testing.T) {
	out, err := runMake("RELEASE_DIR="+t.TempDir(), "VERSION=v99.98.0")
	if err == nil {
		t.Fatalf("make release-manifests VERSION=v99.98.0 succeeded without release series 99.98:\n%s", out)
	}
	if !bytes.Contains(out, []byte("no release series 99.98")) {
		t.Errorf("make failed for another reason than the missing release series:\n%s", out)
	}
}

func TestMetadata(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "metadata.yaml")
	for _, v := range []string{"v0.1.0", releaseVersion} {
		checkSeries(t, path, v)
	}
}

// checkSeries fails unless the metadata.yaml at path maps release v to the
// Cluster API contract v1beta2.
func checkSeries(t *testing.T, path, v string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(data, md); err != nil {
		t.Fatal(err)
	}
	rs := md.GetReleaseSeriesForVersion(mustSemver(t, v))
	if rs == nil || rs.Contract != "v1beta2" {
		t.Fatalf("%s: release %s maps to %+v, want contract v1beta2", path, v, rs)
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

// TestInPlaceUpdatesExtensionConfig checks the released ExtensionConfig
// against the released components: it names the webhook Service the
// manager serves the extension on, and the Secret of the certificate that
// Service presents, so Cluster API trusts it.
func TestInPlaceUpdatesExtensionConfig(t *testing.T) {
	dir := releaseManifests(t, "VERSION="+releaseVersion, "IMG="+releaseImage)
	raw, err := os.ReadFile(filepath.Join(dir, "in-place-updates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ext := objects(t, raw)
	if len(ext) != 1 || ext[0].GetKind() != "ExtensionConfig" || ext[0].GetAPIVersion() != "runtime.cluster.x-k8s.io/v1beta2" {
		t.Fatalf("in-place-updates.yaml holds %d objects, want one runtime.cluster.x-k8s.io/v1beta2 ExtensionConfig", len(ext))
	}
	if ext[0].GetLabels()[providerLabel] != "infrastructure-kubevirt" {
		t.Errorf("the ExtensionConfig lacks %s, so clusterctl delete would leave it", providerLabel)
	}
	comps, err := os.ReadFile(filepath.Join(dir, "infrastructure-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	services, secrets := map[string]bool{}, map[string]bool{}
	for _, o := range objects(t, comps) {
		switch o.GetKind() {
		case "Service":
			services[o.GetNamespace()+"/"+o.GetName()] = true
		case "Certificate":
			name, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
			secrets[o.GetNamespace()+"/"+name] = true
		}
	}
	svcNS, _, _ := unstructured.NestedString(ext[0].Object, "spec", "clientConfig", "service", "namespace")
	svcName, _, _ := unstructured.NestedString(ext[0].Object, "spec", "clientConfig", "service", "name")
	if !services[svcNS+"/"+svcName] || !strings.Contains(svcName, "webhook") {
		t.Errorf("the ExtensionConfig calls Service %s/%s; the components have %v", svcNS, svcName, slices.Sorted(maps.Keys(services)))
	}
	if ca := ext[0].GetAnnotations()["runtime.cluster.x-k8s.io/inject-ca-from-secret"]; !secrets[ca] {
		t.Errorf("the ExtensionConfig takes its CA from Secret %q; the components' certificates write %v", ca, slices.Sorted(maps.Keys(secrets)))
	}
}

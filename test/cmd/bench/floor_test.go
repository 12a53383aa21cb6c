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

package main

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// recorder keeps what would have been created, so that the floor's
// rewrite is checked without a world.
type recorder struct {
	client.Client
	created []*unstructured.Unstructured
}

func (r *recorder) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	r.created = append(r.created, obj.(*unstructured.Unstructured))
	return nil
}

func (r *recorder) byKind() map[string][]*unstructured.Unstructured {
	m := map[string][]*unstructured.Unstructured{}
	for _, u := range r.created {
		m[u.GetKind()] = append(m[u.GetKind()], u)
	}
	return m
}

func refAt(t *testing.T, u *unstructured.Unstructured, path ...string) map[string]any {
	t.Helper()
	ref, ok := nestedMap(u, path)
	if !ok {
		t.Fatalf("%s %s has nothing at %v", u.GetKind(), u.GetName(), path)
	}
	return ref
}

// TestFloorRewritesTheDefaultTemplate renders the default flavor as the
// benchmark does and checks that nothing of the measured provider is left.
func TestFloorRewritesTheDefaultTemplate(t *testing.T) {
	r := &recorder{}
	err := world.ApplyTemplateFileWith(context.Background(), r, filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml"),
		map[string]string{"CLUSTER_NAME": "c", "NAMESPACE": "ns", "WORKER_MACHINE_COUNT": "3"}, toFloor)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range r.created {
		if u.GroupVersionKind().Group == infraGroup {
			t.Errorf("%s %s is still created", u.GetKind(), u.GetName())
		}
	}
	kinds := r.byKind()
	if n := len(kinds["WorldCluster"]); n != 1 {
		t.Errorf("%d WorldClusters, want 1", n)
	}
	if n := len(kinds["WorldMachineTemplate"]); n != 2 {
		t.Errorf("%d WorldMachineTemplates, want 2", n)
	}
	if n := len(kinds["MachineHealthCheck"]); n != 2 {
		t.Errorf("%d MachineHealthChecks, want both kept", n)
	}
	for _, c := range []struct {
		u    *unstructured.Unstructured
		path []string
		kind string
	}{
		{kinds["Cluster"][0], []string{"spec", "infrastructureRef"}, "WorldCluster"},
		{kinds["KubeadmControlPlane"][0], []string{"spec", "machineTemplate", "spec", "infrastructureRef"}, "WorldMachineTemplate"},
		{kinds["MachineDeployment"][0], []string{"spec", "template", "spec", "infrastructureRef"}, "WorldMachineTemplate"},
	} {
		ref := refAt(t, c.u, c.path...)
		if ref["apiGroup"] != worldGroup || ref["kind"] != c.kind {
			t.Errorf("%s refers to %v", c.u.GetKind(), ref)
		}
	}
}

// TestFloorRewritesV1Beta1 covers a template written against v1beta1:
// references by apiVersion, and a health check naming a remediation
// template of the provider.
func TestFloorRewritesV1Beta1(t *testing.T) {
	r := &recorder{}
	err := world.ApplyYAMLWith(context.Background(), r, []byte(`
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: cp}
spec:
  machineTemplate:
    infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: AWSMachineTemplate, name: cp}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineHealthCheck
metadata: {name: mhc}
spec:
  remediationTemplate: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: AWSRemediationTemplate, name: r}
`), toFloor)
	if err != nil {
		t.Fatal(err)
	}
	kinds := r.byKind()
	ref := refAt(t, kinds["KubeadmControlPlane"][0], "spec", "machineTemplate", "infrastructureRef")
	if ref["apiVersion"] != worldVersion || ref["kind"] != "WorldMachineTemplate" {
		t.Errorf("KubeadmControlPlane refers to %v", ref)
	}
	if _, ok := nestedMap(kinds["MachineHealthCheck"][0], []string{"spec", "remediationTemplate"}); ok {
		t.Error("the MachineHealthCheck still names the provider's remediation template")
	}
}

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
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// The floor is the same run with an infrastructure provider that does no
// work: the world's in-process test provider, whose clusters get an
// in-memory API server at once and whose machines join as soon as they
// have bootstrap data. What remains is Cluster API's own work and waits in
// this world on this machine, which the measured provider's seconds are
// divided by.
const (
	infraGroup   = "infrastructure.cluster.x-k8s.io"
	worldGroup   = "infrastructure.world.capkv.io"
	worldVersion = worldGroup + "/v1alpha1"
)

// floorRefs are where Cluster API objects name their infrastructure, in
// v1beta2 and, where it differs, v1beta1 (which the world converts), so
// that a template written for either works. Kinds are unique across
// Cluster API's groups, so the kind alone picks the paths.
var floorRefs = map[string][][]string{
	"Cluster":             {{"spec", "infrastructureRef"}},
	"KubeadmControlPlane": {{"spec", "machineTemplate", "spec", "infrastructureRef"}, {"spec", "machineTemplate", "infrastructureRef"}},
	"MachineDeployment":   {{"spec", "template", "spec", "infrastructureRef"}},
	"MachineSet":          {{"spec", "template", "spec", "infrastructureRef"}},
	"Machine":             {{"spec", "infrastructureRef"}},
}

// remediationRefs are where a MachineHealthCheck names an external
// remediation template, in v1beta2 and v1beta1.
var remediationRefs = [][]string{{"spec", "remediation", "templateRef"}, {"spec", "remediationTemplate"}}

// runFloor measures the floor in a world of its own, started as the
// provider's is, and stops that world again.
func runFloor(ctx context.Context, o options) (provisioned, nodeRefs time.Duration, _ Timeline, err error) {
	w, err := startWorld(o, "floor", nil)
	if err != nil {
		return 0, 0, Timeline{}, err
	}
	// No provider process runs: the world's test provider is in-process
	// and always on, and only acts on its own kinds.
	tl := newTimeline()
	provisioned, nodeRefs, err = phase{name: "floor", mutate: toFloor, timeline: tl}.measure(ctx, w, o)
	if stopErr := w.Stop(); err == nil && stopErr != nil {
		err = fmt.Errorf("stopping the floor's world: %w", stopErr)
	}
	if err == nil {
		fmt.Printf(">> floor: all provisioned at %.1fs, all with a Node at %.1fs\n", provisioned.Seconds(), nodeRefs.Seconds())
	}
	return provisioned, nodeRefs, tl.summary(), err
}

// toFloor rewrites one object of a rendered cluster template for the
// floor: the infrastructure cluster and machine templates become the
// world's, the references to them follow, and the infrastructure objects
// the world has no equivalent for (remediation templates) are left out.
func toFloor(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	if gvk.Group == infraGroup {
		kind, spec, ok := floorKind(gvk.Kind)
		if !ok {
			return world.ErrSkipObject
		}
		u.SetAPIVersion(worldVersion)
		u.SetKind(kind)
		// The spec is dropped whole, controlPlaneEndpoint included: the
		// world's provider fills that in with its in-memory API server.
		u.Object["spec"] = spec
		delete(u.Object, "status")
		return nil
	}
	if gvk.Kind == "MachineHealthCheck" {
		// Without its template the check falls back to Cluster API's own
		// remediation; it is kept because it watches the tenants' Nodes as
		// it does in the provider's run.
		for _, path := range remediationRefs {
			if ref, ok := nestedMap(u, path); ok && refGroup(ref) == infraGroup {
				unstructured.RemoveNestedField(u.Object, path...)
			}
		}
		return nil
	}
	for _, path := range floorRefs[gvk.Kind] {
		ref, ok := nestedMap(u, path)
		if !ok || refGroup(ref) != infraGroup {
			continue
		}
		kind, _, ok := floorKind(fmt.Sprint(ref["kind"]))
		if !ok {
			return fmt.Errorf("%s %s: the floor has no equivalent of %v", gvk.Kind, u.GetName(), ref["kind"])
		}
		ref["kind"] = kind
		if _, v1beta1 := ref["apiVersion"]; v1beta1 {
			ref["apiVersion"] = worldVersion
		} else {
			ref["apiGroup"] = worldGroup
		}
		if err := unstructured.SetNestedMap(u.Object, ref, path...); err != nil {
			return err
		}
	}
	return nil
}

// floorKind is the world's kind for an infrastructure kind, and the spec
// it starts with; the suffix decides, so that another provider's template
// (AWSCluster, AWSMachineTemplate) has a floor too.
func floorKind(kind string) (string, map[string]any, bool) {
	switch {
	case strings.HasSuffix(kind, "MachineTemplate"):
		return "WorldMachineTemplate", map[string]any{"template": map[string]any{"spec": map[string]any{}}}, true
	case strings.HasSuffix(kind, "Cluster"):
		return "WorldCluster", map[string]any{}, true
	}
	return "", nil, false
}

func nestedMap(u *unstructured.Unstructured, path []string) (map[string]any, bool) {
	m, ok, err := unstructured.NestedMap(u.Object, path...)
	return m, ok && err == nil
}

// refGroup is the API group a reference names, by apiGroup (v1beta2) or
// apiVersion (v1beta1 and remediation templates).
func refGroup(ref map[string]any) string {
	if g, ok := ref["apiGroup"].(string); ok {
		return g
	}
	if v, ok := ref["apiVersion"].(string); ok {
		gv, err := schema.ParseGroupVersion(v)
		if err == nil {
			return gv.Group
		}
	}
	return ""
}

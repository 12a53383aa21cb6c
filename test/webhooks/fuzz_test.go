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
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/webhooks"
)

// seedSpecs returns the JSON of the "spec" of every sample manifest whose
// kind matches, plus a few hand-written edge cases.
func seedSpecs(t testing.TB, kinds ...string) [][]byte {
	var seeds [][]byte
	for _, u := range capkManifests(t) {
		for _, k := range kinds {
			if u.GetKind() != k {
				continue
			}
			spec := u.Object["spec"]
			if tmpl, ok := spec.(map[string]any)["template"].(map[string]any); ok {
				spec = tmpl["spec"]
			}
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, data)
		}
	}
	return append(seeds, []byte(`{}`), []byte(`{"virtualMachineTemplate":{"spec":{"running":false,"runStrategy":"Halted"}}}`))
}

// FuzzKubevirtMachineWebhook feeds arbitrary KubevirtMachine specs to the
// defaulting and validating webhook and checks that neither panics, that
// defaulting is idempotent and only fills unset fields, and that validation
// is deterministic across a JSON round trip (what the API server stores).
func FuzzKubevirtMachineWebhook(f *testing.F) {
	for _, s := range seedSpecs(f, "KubevirtMachine", "KubevirtMachineTemplate") {
		f.Add(s)
	}
	ctx := context.Background()
	wh := webhooks.KubevirtMachine{}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &infrav1.KubevirtMachine{}
		m.Name, m.Namespace = "fuzz", "default"
		if err := yaml.Unmarshal(data, &m.Spec); err != nil {
			return
		}
		original := m.DeepCopy()
		if err := wh.Default(ctx, m); err != nil {
			t.Fatalf("defaulting failed: %v", err)
		}
		once := m.DeepCopy()
		if err := wh.Default(ctx, m); err != nil || !equality.Semantic.DeepEqual(once, m) {
			t.Fatalf("defaulting is not idempotent: %v", err)
		}
		if o := original.Spec.VirtualMachineTemplate.Spec; o.Running != nil || o.RunStrategy != nil {
			if got := m.Spec.VirtualMachineTemplate.Spec; !equality.Semantic.DeepEqual(o.Running, got.Running) ||
				!equality.Semantic.DeepEqual(o.RunStrategy, got.RunStrategy) {
				t.Fatalf("defaulting rewrote a run strategy the user set")
			}
		}
		_, err1 := wh.ValidateCreate(ctx, m)
		roundTrip := &infrav1.KubevirtMachine{}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, roundTrip); err != nil {
			t.Fatal(err)
		}
		_, err2 := wh.ValidateCreate(ctx, roundTrip)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("validation changed across a JSON round trip: %v / %v", err1, err2)
		}
		// Validating an update to the same spec (with providerID filled in
		// by the provider) must never fail for immutability.
		if err1 == nil {
			next := m.DeepCopy()
			id := infrav1.ProviderIDPrefix + "fuzz"
			next.Spec.ProviderID = &id
			if m.Spec.ProviderID == nil {
				if _, err := wh.ValidateUpdate(ctx, m, next); err != nil {
					t.Fatalf("setting providerID on a valid machine was refused: %v", err)
				}
			}
		}
	})
}

// FuzzKubevirtClusterWebhook does the same for KubevirtCluster specs.
func FuzzKubevirtClusterWebhook(f *testing.F) {
	for _, s := range seedSpecs(f, "KubevirtCluster", "KubevirtClusterTemplate") {
		f.Add(s)
	}
	ctx := context.Background()
	wh := webhooks.KubevirtCluster{}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &infrav1.KubevirtCluster{}
		c.Name, c.Namespace = "fuzz", "default"
		if err := yaml.Unmarshal(data, &c.Spec); err != nil {
			return
		}
		original := c.DeepCopy()
		if err := wh.Default(ctx, c); err != nil {
			t.Fatalf("defaulting failed: %v", err)
		}
		once := c.DeepCopy()
		_ = wh.Default(ctx, c)
		if !equality.Semantic.DeepEqual(once, c) {
			t.Fatal("defaulting is not idempotent")
		}
		if o := original.Spec.ControlPlaneServiceTemplate.Spec.Type; o != "" && o != c.Spec.ControlPlaneServiceTemplate.Spec.Type {
			t.Fatalf("defaulting rewrote service type %q", o)
		}
		_, err := wh.ValidateCreate(ctx, c)
		if err == nil {
			// An unchanged spec is always a valid update.
			if _, err := wh.ValidateUpdate(ctx, c, c.DeepCopy()); err != nil {
				t.Fatalf("a no-op update of a valid cluster was refused: %v", err)
			}
		}
	})
}

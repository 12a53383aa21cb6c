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

package inplace

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// MachineSpecPath and TemplateSpecPath are where a KubevirtMachine and a
// KubevirtMachineTemplate hold the machine spec.
var (
	MachineSpecPath  = []string{"spec"}
	TemplateSpecPath = []string{"spec", "template", "spec"}
)

// Patch is the JSON merge patch that takes an object whose machine spec,
// at path, is current to one whose spec is covered: what Cluster API
// applies to its current objects to see whether the changes the provider
// can make in place are all the changes there are. Both specs go through
// the same type, so fields the API server defaulted never show as
// changes.
func Patch(current, covered *infrav1.KubevirtMachineSpec, path []string) ([]byte, error) {
	from, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(covered)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("diffing the machine specs: %w", err)
	}
	return wrap(diff, path)
}

// WholePatch is the JSON merge patch that takes the raw current object's
// machine spec, at path, to the raw desired object's, byte for byte as
// Cluster API compares them: for a change Decide covers whole, whose
// typed specs differ only where the provider applies the change. Objects
// written from YAML and copies written through Go types hold the same
// spec in different forms (an empty `devices: {}` kept or dropped), and
// Cluster API, comparing untyped, would otherwise see those as changes
// left over and roll the machines.
func WholePatch(currentRaw, desiredRaw []byte, path []string) ([]byte, error) {
	at := func(raw []byte) ([]byte, error) {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, err
		}
		for _, p := range path {
			m, _ := doc.(map[string]any)
			doc = m[p]
		}
		if doc == nil {
			doc = map[string]any{}
		}
		return json.Marshal(doc)
	}
	from, err := at(currentRaw)
	if err != nil {
		return nil, fmt.Errorf("reading the current machine spec: %w", err)
	}
	to, err := at(desiredRaw)
	if err != nil {
		return nil, fmt.Errorf("reading the desired machine spec: %w", err)
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("diffing the machine specs: %w", err)
	}
	return wrap(diff, path)
}

// wrap nests a patch of the machine spec at path.
func wrap(diff []byte, path []string) ([]byte, error) {
	var wrapped any = json.RawMessage(diff)
	for i := len(path) - 1; i >= 0; i-- {
		wrapped = map[string]any{path[i]: wrapped}
	}
	return json.Marshal(wrapped)
}

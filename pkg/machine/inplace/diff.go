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
	"reflect"
	"slices"
	"strings"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// differences lists the field paths (spec.virtualMachineTemplate...) where
// two specs differ: objects are compared field by field, anything else
// (lists, values) whole.
func differences(a, b *infrav1.KubevirtMachineSpec) []string {
	var out []string
	walk("spec", toMap(a), toMap(b), &out)
	slices.Sort(out)
	return out
}

func toMap(spec *infrav1.KubevirtMachineSpec) map[string]any {
	data, err := json.Marshal(spec)
	if err != nil {
		// A spec is plain data; it always marshals.
		panic(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

func walk(path string, a, b any, out *[]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if !aIsMap || !bIsMap {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, path)
		}
		return
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for k := range keys {
		walk(strings.Join([]string{path, k}, "."), am[k], bm[k], out)
	}
}

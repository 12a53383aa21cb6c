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
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// capkManifests reads the manifests written for the community provider in
// testdata/capk.
func capkManifests(t testing.TB) map[string]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "capk", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in testdata/capk: %v", err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = u
	}
	return out
}

// isSubset reports whether every field set in want has the same value in got,
// and returns the path of the first difference.
func isSubset(want, got any, path string) (bool, string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false, path
		}
		for k, wv := range w {
			if ok, p := isSubset(wv, g[k], path+"."+k); !ok {
				return false, p
			}
		}
		return true, ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false, path
		}
		for i := range w {
			if ok, p := isSubset(w[i], g[i], path+"[]"); !ok {
				return false, p
			}
		}
		return true, ""
	default:
		return equalScalars(want, got), path
	}
}

func equalScalars(a, b any) bool {
	// JSON numbers decode as int64 from YAML and float64 from the server.
	toFloat := func(v any) (float64, bool) {
		switch n := v.(type) {
		case int64:
			return float64(n), true
		case float64:
			return n, true
		case int:
			return float64(n), true
		}
		return 0, false
	}
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return a == b
}

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

package docs

import (
	"go/ast"
	"path/filepath"
	"testing"
)

// conditionWriters are the calls that write a condition.
var conditionWriters = map[string]bool{
	"conditions.Set": true, "conditions.Delete": true,
	"outcome.Set": true, "outcome.Record": true, "outcome.RecordWarning": true, "outcome.Summarize": true,
}

// TestServicesSetConditionsInOneFile holds the machine and pool services
// to one place for their conditions: every call that writes one is in the
// package's status.go, so that a reader finds what a condition says, and
// when, in one file. The evacuation, which the machine service runs,
// writes none itself.
func TestServicesSetConditionsInOneFile(t *testing.T) {
	for _, dir := range []string{"machine", "machinepool", filepath.Join("machine", "evacuation")} {
		for name, f := range parseDir(t, filepath.Join("..", "pkg", dir)) {
			if name == "status.go" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && conditionWriters[pkg.Name+"."+sel.Sel.Name] {
					t.Errorf("pkg/%s/%s: %s.%s writes a condition outside status.go", dir, name, pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

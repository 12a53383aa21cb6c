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
	"strings"
	"testing"
)

// conditionWriters are the calls that write a condition.
var conditionWriters = map[string]bool{
	"conditions.Set": true, "conditions.Delete": true,
	"outcome.Set": true, "outcome.Record": true, "outcome.RecordWarning": true, "outcome.Summarize": true,
	"outcome.MarkNotPaused": true,
}

// TestServicesSetConditionsInOneFile holds KubevirtMachine and
// KubevirtMachinePool to one file each for their conditions: every call
// that writes one is in the service package's status.go, so that a reader
// finds what a condition says, and when, in one file. The evacuation,
// which the machine service runs, writes none itself, and the two kinds'
// controllers set InfraClusterAvailable, Paused and Ready through their
// status.go. The one exception is Cluster API's
// paused.EnsurePausedCondition, which a controller calls for a paused
// Cluster: it writes the condition at once, as the contract has it.
func TestServicesSetConditionsInOneFile(t *testing.T) {
	for _, dir := range []string{"machine", "machinepool", filepath.Join("machine", "evacuation")} {
		for name, f := range parseDir(t, filepath.Join("..", "pkg", dir)) {
			if name == "status.go" {
				continue
			}
			for _, w := range writersIn(f) {
				t.Errorf("pkg/%s/%s: %s writes a condition outside status.go", dir, name, w)
			}
		}
	}
	for name, f := range parseDir(t, filepath.Join("..", "controllers")) {
		if !strings.HasPrefix(name, "kubevirtmachine_") && !strings.HasPrefix(name, "kubevirtmachinepool_") {
			continue
		}
		for _, w := range writersIn(f) {
			t.Errorf("controllers/%s: %s writes a condition; the kind's status.go is where its conditions are set", name, w)
		}
	}
}

// writersIn lists the calls in f that write a condition.
func writersIn(f *ast.File) []string {
	var found []string
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
			found = append(found, pkg.Name+"."+sel.Sel.Name)
		}
		return true
	})
	return found
}

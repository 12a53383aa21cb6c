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

// Package docs holds the checks that keep the reference pages in step with
// the code.
package docs

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	apiPath  = "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	capiPath = "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// setByLibraries are the reasons set for us inside Cluster API's helpers,
// which the provider's code never names: util/paused's Paused condition.
var setByLibraries = []string{"Paused", "NotPaused"}

// TestTroubleshootingListsEveryReason compares the condition reasons the
// provider's code sets (every `<package>.<Name>Reason` constant that
// pkg/ and controllers/ name, resolved to its value) with the reasons
// troubleshooting.md has a row for: a reason the code sets must be
// explained there, and a row must not outlive its reason.
func TestTroubleshootingListsEveryReason(t *testing.T) {
	consts := map[string]map[string]string{
		apiPath:  packageConsts(t, "../api/v1alpha1"),
		capiPath: packageConsts(t, packageDir(t, capiPath)),
	}
	// The API package's aliases of Cluster API's reasons resolve to the
	// values they alias.
	for name, v := range consts[apiPath] {
		if ref, ok := strings.CutPrefix(v, "clusterv1."); ok {
			consts[apiPath][name] = consts[capiPath][ref]
		}
	}
	set := map[string]string{}
	for _, r := range setByLibraries {
		set[r] = "Cluster API's util/paused"
	}
	for _, dir := range []string{"../pkg", "../controllers"} {
		for ref, where := range reasonRefs(t, dir) {
			i := strings.LastIndex(ref, ".")
			path, name := ref[:i], ref[i+1:]
			v, ok := consts[path][name]
			if !ok || v == "" {
				t.Errorf("%s names %s.%s, whose value this test cannot read", where, path, name)
				continue
			}
			set[v] = where
		}
	}
	documented := documentedReasons(t, "troubleshooting.md")
	for _, r := range sortedKeys(set) {
		if !documented[r] {
			t.Errorf("reason %q (set in %s) has no row in docs/troubleshooting.md", r, set[r])
		}
	}
	for _, r := range sortedKeys(documented) {
		if _, ok := set[r]; !ok {
			t.Errorf("docs/troubleshooting.md has a row for %q, which no code sets", r)
		}
	}
	if len(set) < 50 {
		t.Fatalf("found only %d reasons in the code; the scan is broken", len(set))
	}
}

// packageDir is the source directory of a package of the build, as the Go
// command finds it (downloading its module when needed).
func packageDir(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list %s: %q, %v", pkg, dir, err)
	}
	return dir
}

// packageConsts reads a package's constants whose names end in Reason: a
// string literal's value, a same-package constant's, or "clusterv1.<Name>"
// for an alias of Cluster API's.
func packageConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	raw := map[string]ast.Expr{}
	for _, f := range parseDir(t, dir) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						raw[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	var value func(e ast.Expr, depth int) string
	value = func(e ast.Expr, depth int) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, _ := strconv.Unquote(e.Value)
			return s
		case *ast.Ident:
			if depth < 5 && raw[e.Name] != nil {
				return value(raw[e.Name], depth+1)
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "clusterv1" {
				return "clusterv1." + e.Sel.Name
			}
		}
		return ""
	}
	out := map[string]string{}
	for name, e := range raw {
		if strings.HasSuffix(name, "Reason") {
			out[name] = value(e, 0)
		}
	}
	return out
}

// reasonRefs finds every selector <import>.<Name>Reason in the non-test
// files under root, as "<import path>.<Name>", with a file that names it.
func reasonRefs(t *testing.T, root string) map[string]string {
	t.Helper()
	refs := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		for name, f := range parseDir(t, path) {
			file := filepath.Join(path, name)
			imports := map[string]string{}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				alias := filepath.Base(p)
				if imp.Name != nil {
					alias = imp.Name.Name
				}
				imports[alias] = p
			}
			calls := map[ast.Expr]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					calls[call.Fun] = true
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if ok && calls[sel] {
					return true
				}
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Reason") {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || imports[x.Name] == "" {
					return true
				}
				switch p := imports[x.Name]; p {
				case apiPath, capiPath:
					refs[p+"."+sel.Sel.Name] = strings.TrimPrefix(file, "../")
				default:
					t.Errorf("%s names %s.%s from %s; teach this test that package", file, x.Name, sel.Sel.Name, p)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// parseDir parses the non-test Go files of one directory, by file name.
func parseDir(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = f
	}
	return files
}

// reasonRow is a table row of troubleshooting.md whose first cell is a
// reason: "| `Reason` | ...".
var reasonRow = regexp.MustCompile("^\\| `([A-Za-z]+)` \\|")

// documentedReasons reads the reasons troubleshooting.md has rows for.
func documentedReasons(t *testing.T, page string) map[string]bool {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := reasonRow.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestPreflightPageListsEveryFinding checks that preflight.md's findings
// table has every reason pkg/infra/preflight reports, and no other.
func TestPreflightPageListsEveryFinding(t *testing.T) {
	want := map[string]bool{}
	for name, v := range packageConsts(t, "../pkg/infra/preflight") {
		if strings.HasSuffix(name, "Reason") {
			want[v] = true
		}
	}
	got := map[string]bool{}
	for _, line := range strings.Split(readPage(t, "preflight.md"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]+)`").FindAllStringSubmatch(cells[2], -1) {
			got[m[1]] = true
		}
	}
	for _, r := range sortedKeys(want) {
		if !got[r] {
			t.Errorf("preflight.md has no row for the finding %s", r)
		}
	}
	for _, r := range sortedKeys(got) {
		if !want[r] {
			t.Errorf("preflight.md has a row for %s, which pkg/infra/preflight does not report", r)
		}
	}
}

func readPage(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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

package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// definedNames are the names of every metric of All, histograms with
// their series suffixes.
func definedNames(t *testing.T) map[string]bool {
	t.Helper()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, c := range All() {
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

// usedNames are the capkv_ metric names an expression reads.
func usedNames(expr string) []string {
	return regexp.MustCompile(`capkv_[a-z_]+`).FindAllString(expr, -1)
}

// TestShippedMonitoringReadsRealMetrics checks that every query of the
// Grafana dashboard and every alert reads metrics the provider exports, so
// a renamed metric cannot leave an empty panel or a silent alert.
func TestShippedMonitoringReadsRealMetrics(t *testing.T) {
	defined := definedNames(t)
	var exprs []string

	raw, err := os.ReadFile("../../../config/grafana/capkv-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatal(err)
	}
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}

	raw, err = os.ReadFile("../../../config/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			alerts++
			exprs = append(exprs, r.Expr)
		}
	}
	if alerts < 4 || len(exprs) < 10 {
		t.Fatalf("read %d alerts and %d expressions, want the shipped ones", alerts, len(exprs))
	}

	used := map[string]bool{}
	for _, e := range exprs {
		names := usedNames(e)
		if len(names) == 0 {
			t.Errorf("%q reads no capkv_ metric", e)
		}
		for _, n := range names {
			used[n] = true
			if !defined[n] {
				t.Errorf("%q reads %s, which the provider does not export", e, n)
			}
		}
	}
	// Every metric is shown or alerted on somewhere.
	for n := range defined {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if base == n && !used[n] && !used[n+"_bucket"] {
			t.Errorf("%s is in no panel and no alert", n)
		}
	}
}

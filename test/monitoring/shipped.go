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

package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Endpoint is the scrape endpoint of the shipped ServiceMonitor.
type Endpoint struct {
	Scheme    string `json:"scheme"`
	Path      string `json:"path"`
	TLSConfig struct {
		InsecureSkipVerify bool `json:"insecureSkipVerify"`
	} `json:"tlsConfig"`
}

// ShippedEndpoint reads the endpoint of config/prometheus/servicemonitor.yaml,
// so that the scrape here is configured as the Prometheus Operator would
// configure it from that file.
func ShippedEndpoint() (Endpoint, error) {
	var sm struct {
		Spec struct {
			Endpoints []Endpoint `json:"endpoints"`
		} `json:"spec"`
	}
	if err := readShipped(filepath.Join("config", "prometheus", "servicemonitor.yaml"), &sm); err != nil {
		return Endpoint{}, err
	}
	if len(sm.Spec.Endpoints) != 1 {
		return Endpoint{}, fmt.Errorf("the ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	return sm.Spec.Endpoints[0], nil
}

// Rules is a Prometheus rule file.
type Rules struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a group of rules evaluated together.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ShippedRules reads the groups of the PrometheusRule in
// config/prometheus/rules.yaml, which the Prometheus Operator turns into
// this rule file.
func ShippedRules() (Rules, error) {
	var pr struct {
		Spec Rules `json:"spec"`
	}
	if err := readShipped(filepath.Join("config", "prometheus", "rules.yaml"), &pr); err != nil {
		return Rules{}, err
	}
	return pr.Spec, nil
}

// secondsThreshold is the number an alert compares a *_seconds metric
// with, at the end of its expression.
var secondsThreshold = regexp.MustCompile(`(_seconds\b.*>\s*)([0-9]+(?:\.[0-9]+)?)\s*$`)

// ScaleRules divides every wait of the rules by speedup: each "for", and
// each threshold in seconds that an expression ends with, so that a world
// whose machines move speedup times faster than a real one's raises the
// same alerts for the same stories. Rates and counts are left as they are.
func ScaleRules(rules Rules, speedup float64) Rules {
	out := Rules{}
	for _, g := range rules.Groups {
		sg := RuleGroup{Name: g.Name}
		for _, r := range g.Rules {
			if d, err := time.ParseDuration(r.For); err == nil {
				r.For = promDuration(time.Duration(float64(d) / speedup))
			}
			r.Expr = strings.TrimSpace(r.Expr)
			if m := secondsThreshold.FindStringSubmatchIndex(r.Expr); m != nil {
				v, _ := strconv.ParseFloat(r.Expr[m[4]:m[5]], 64)
				r.Expr = r.Expr[:m[4]] + strconv.FormatFloat(v/speedup, 'f', -1, 64)
			}
			sg.Rules = append(sg.Rules, r)
		}
		out.Groups = append(out.Groups, sg)
	}
	return out
}

// Panel is a panel of the shipped dashboard.
type Panel struct {
	Title   string
	Unit    string
	Queries []Query
}

// Query is one query of a panel.
type Query struct {
	Expr   string
	Legend string
}

// ShippedDashboard reads the panels of config/grafana/capkv-dashboard.json.
func ShippedDashboard() ([]Panel, error) {
	var dashboard struct {
		Panels []struct {
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := readShipped(filepath.Join("config", "grafana", "capkv-dashboard.json"), &dashboard); err != nil {
		return nil, err
	}
	var panels []Panel
	for _, p := range dashboard.Panels {
		panel := Panel{Title: p.Title, Unit: p.FieldConfig.Defaults.Unit}
		for _, t := range p.Targets {
			panel.Queries = append(panel.Queries, Query{Expr: t.Expr, Legend: t.LegendFormat})
		}
		panels = append(panels, panel)
	}
	return panels, nil
}

// Expand replaces the Grafana variables of a dashboard query:
// $__rate_interval by rateInterval, which Grafana makes at least four scrape
// intervals.
func Expand(expr string, rateInterval time.Duration) string {
	return strings.ReplaceAll(expr, "$__rate_interval", promDuration(rateInterval))
}

func readShipped(path string, into any) error {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path)) //nolint:gosec // a file of this repository
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

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
	"testing"
)

func TestScaleRules(t *testing.T) {
	shipped, err := ShippedRules()
	if err != nil {
		t.Fatal(err)
	}
	scaled := ScaleRules(shipped, 10)
	got := map[string]Rule{}
	for _, r := range scaled.Groups[0].Rules {
		got[r.Alert] = r
	}
	for _, tc := range []struct {
		alert, expr, forDuration string
	}{
		// A threshold in seconds is a wait: scaled.
		{alert: "CAPKVMachineStuck", expr: "max by (stage) (capkv_machine_stage_oldest_seconds) > 90"},
		// Counts and rates are not.
		{alert: "CAPKVMachinesFailing", expr: `sum by (reason) (capkv_machines{phase="failed"}) > 0`, forDuration: "60000ms"},
		{alert: "CAPKVInfraClusterRequestErrors", expr: "sum by (infra_cluster) (rate(capkv_infra_cluster_request_errors_total[5m])) > 0.1", forDuration: "60000ms"},
		{alert: "CAPKVGoldenImageImportFailing", forDuration: "30000ms"},
	} {
		r, ok := got[tc.alert]
		if !ok {
			t.Fatalf("no rule %s", tc.alert)
		}
		if tc.expr != "" && r.Expr != tc.expr {
			t.Errorf("%s: expr %q, want %q", tc.alert, r.Expr, tc.expr)
		}
		if r.For != tc.forDuration {
			t.Errorf("%s: for %q, want %q", tc.alert, r.For, tc.forDuration)
		}
	}
}

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
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// allowedLabels are the only label names the provider's metrics may have:
// none names an object.
var allowedLabels = map[string]bool{
	StageLabel: true, ReasonLabel: true, PhaseLabel: true, MethodLabel: true,
	StateLabel: true, InfraClusterLabel: true, CodeLabel: true, "le": true,
}

// TestNoPerObjectLabels gathers every capkv_ metric from the registry the
// manager serves, each with a sample, and checks its labels.
func TestNoPerObjectLabels(t *testing.T) {
	Machines.Set("ns/m-0", PhaseProvisioning, "Pending")
	InfraClusterUsers.Set("KubevirtMachine/ns/m-0", ManagementCluster, "Available")
	GoldenImageVolumes.Set("|ns/golden", GoldenInUse)
	MachineStageSeconds.WithLabelValues(StageBoot).Observe(1)
	MachineFailures.WithLabelValues("Unschedulable").Inc()
	GoldenImageClones.WithLabelValues("snapshot").Inc()
	InfraClusterRequestSeconds.WithLabelValues(ManagementCluster, "GET").Observe(0.01)
	InfraClusterRequestErrors.WithLabelValues(ManagementCluster, "503").Inc()
	defer func() {
		Machines.Forget("ns/m-0")
		InfraClusterUsers.Forget("KubevirtMachine/ns/m-0")
		GoldenImageVolumes.Forget("|ns/golden")
	}()

	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "capkv_") {
			continue
		}
		seen++
		if f.GetHelp() == "" {
			t.Errorf("%s has no help", f.GetName())
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowedLabels[l.GetName()] {
					t.Errorf("%s has label %q, which is not one of the bounded labels", f.GetName(), l.GetName())
				}
			}
		}
	}
	if seen < 15 {
		t.Errorf("gathered %d capkv_ metrics, want every one of them", seen)
	}
}

func TestStateGaugeSumsObjects(t *testing.T) {
	g := newStateGauge("capkv_test_objects", "test", PhaseLabel, ReasonLabel)
	g.Set("a", PhaseProvisioning, "Pending")
	g.Set("b", PhaseProvisioning, "Pending")
	g.Set("c", PhaseFailed, "Unschedulable")
	g.Set("c", PhaseProvisioned, "Ready")
	g.Set("d", PhaseDeleting, "Deleting")
	g.Forget("d")
	want := `
# HELP capkv_test_objects test
# TYPE capkv_test_objects gauge
capkv_test_objects{phase="provisioned",reason="Ready"} 1
capkv_test_objects{phase="provisioning",reason="Pending"} 2
`
	if err := testutil.CollectAndCompare(g, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestInstrumentConfigCountsFailuresNotWatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	InstrumentConfig(cfg, "ns/kubeconfig")
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	get("/ok")
	get("/fail")
	get("/ok?watch=true")
	observed := testutil.ToFloat64(InfraClusterRequestErrors.WithLabelValues("ns/kubeconfig", "503"))
	if observed != 1 {
		t.Errorf("errors with code 503: %v, want 1", observed)
	}
	m := &dto.Metric{}
	if err := InfraClusterRequestSeconds.WithLabelValues("ns/kubeconfig", http.MethodGet).(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("timed requests: %d, want 2 (the watch is not timed)", n)
	}
}

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

package monitoring_test

import (
	"context"
	"crypto/tls"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"gonum.org/v1/plot/plotutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/test/monitoring"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// badImage is a node image CDI cannot import: its importer fails with an
// unknown image format and CDI restarts it without end.
const badImage = "docker://quay.io/capk/bad-image:v1.34.1"

// metricName matches the provider's metric names in a query.
var metricName = regexp.MustCompile(`capkv_[a-z_]+`)

// stuckAfter is CAPKVMachineStuck's threshold once divided by speedup.
const stuckAfter = 900 * time.Second / speedup

// TestShippedMonitoringOnARealPrometheus brings up a small cluster, and
// a cluster whose workers' node image CDI cannot import, while the real Prometheus
// scrapes the provider with the shipped settings and evaluates the shipped
// alerts. Every dashboard query returns data and every alert evaluates;
// the stuck-machine alert fires for the machine with the bad image, for
// its stage, not before it has been there for the threshold, and no more
// once it is gone; the infra cluster alerts stay quiet.
func TestShippedMonitoringOnARealPrometheus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	start := time.Now()

	// The manager starts its metrics server beside its controllers: wait
	// until the endpoint answers at all, then read what it answers.
	status := 0
	g.Eventually(func() int { status = anonymousScrape(ctx); return status }).WithTimeout(time.Minute).WithPolling(time.Second).
		ShouldNot(BeZero(), "the metrics endpoint answers")
	g.Expect(status).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden),
		"the metrics endpoint lets only authorized scrapers in")
	g.Expect(prom.WaitTargetUp(ctx, time.Minute)).To(Succeed())

	c := w.Env.Client
	ns := "observed"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(world.ApplyClusterTemplate(ctx, c, map[string]string{"CLUSTER_NAME": "healthy", "NAMESPACE": ns,
		"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1"})).To(Succeed())
	// The control plane's image is imported before its machines exist
	// (docs/golden-images.md): the workers' bad image makes the stuck
	// machine.
	g.Expect(world.ApplyTemplateFileWith(ctx, c, filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml"),
		map[string]string{"CLUSTER_NAME": "broken", "NAMESPACE": ns, "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1"},
		func(u *unstructured.Unstructured) error {
			if u.GetKind() != "KubevirtMachineTemplate" || u.GetName() != "broken-md-0" {
				return nil
			}
			return unstructured.SetNestedField(u.Object, badImage, "spec", "template", "spec", "rootDisk", "image", "registry", "url")
		})).To(Succeed())

	g.Eventually(nodesJoined(ctx, ns, "healthy")).WithTimeout(within).WithPolling(time.Second).Should(Equal(2))

	var stuck promv1.Alert
	g.Eventually(func() []promv1.Alert {
		alerts := firing(ctx, g, "CAPKVMachineStuck")
		if len(alerts) > 0 {
			stuck = alerts[0]
		}
		return alerts
	}).WithTimeout(within).WithPolling(time.Second).Should(HaveLen(1))
	g.Expect(stuck.Labels).To(HaveKeyWithValue(model.LabelName(metrics.StageLabel), model.LabelValue(metrics.StageGoldenImage)))
	var broken []infrav1.KubevirtMachine
	for _, km := range machinesOf(ctx, g, ns, "broken") {
		if strings.HasPrefix(km.Name, "broken-md-0-") {
			broken = append(broken, km)
		}
	}
	g.Expect(broken).To(HaveLen(1))
	g.Expect(stuck.ActiveAt.Sub(broken[0].CreationTimestamp.Time)).To(BeNumerically(">=", stuckAfter-time.Second),
		"fired only once the machine had been stuck for the threshold")
	g.Eventually(func() []promv1.Alert { return firing(ctx, g, "CAPKVGoldenImageImportFailing") }).
		WithTimeout(within).WithPolling(time.Second).Should(HaveLen(1))
	g.Eventually(func() []promv1.Alert { return firing(ctx, g, "CAPKVMachinesFailing") }).
		WithTimeout(within).WithPolling(time.Second).Should(ConsistOf(HaveField("Labels",
		HaveKeyWithValue(model.LabelName(metrics.ReasonLabel), model.LabelValue(infrav1.WaitingForGoldenImageReason)))))

	t.Run("every dashboard query returns data", func(t *testing.T) {
		panels, err := monitoring.ShippedDashboard()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, p := range panels {
			for _, q := range p.Queries {
				NewWithT(t).Expect(samples(ctx, t, q.Expr, start)).To(BeNumerically(">", 0), "%s: %s", p.Title, q.Expr)
			}
		}
	})

	t.Run("every alert evaluates, and only these fired", func(t *testing.T) {
		g := NewWithT(t)
		rules, err := prom.API.Rules(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		shipped, err := monitoring.ShippedRules()
		g.Expect(err).NotTo(HaveOccurred())
		evaluated := 0
		for _, group := range rules.Groups {
			for _, r := range group.Rules {
				alert, ok := r.(promv1.AlertingRule)
				g.Expect(ok).To(BeTrue(), "%#v", r)
				g.Expect(alert.Health).To(BeEquivalentTo(promv1.RuleHealthGood), "%s: %s", alert.Name, alert.LastError)
				_, _, err := prom.API.Query(ctx, alert.Query, time.Now())
				g.Expect(err).NotTo(HaveOccurred(), alert.Name)
				// What the alert compares is there to compare.
				for _, name := range metricName.FindAllString(alert.Query, -1) {
					g.Expect(samples(ctx, t, name, start)).To(BeNumerically(">", 0), "%s reads %s", alert.Name, name)
				}
				evaluated++
			}
		}
		g.Expect(evaluated).To(Equal(len(shipped.Groups[0].Rules)))
		oldest, _, err := prom.API.Query(ctx, `max by (stage) (max_over_time(capkv_machine_stage_oldest_seconds[15m]))`, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("longest time in each stage (stuck after %s): %s", stuckAfter, oldest)
		g.Expect(samples(ctx, t, `ALERTS{alertname="CAPKVMachineStuck", stage!="`+metrics.StageGoldenImage+`"}`, start)).To(BeZero(),
			"no healthy machine stayed in a stage for the threshold")
		g.Expect(samples(ctx, t, `ALERTS{alertname=~"CAPKVInfraCluster.*"}`, start)).To(BeZero(), "the infra cluster was fine")
	})

	t.Run("the main panels render", func(t *testing.T) {
		g := NewWithT(t)
		files, err := prom.RenderPanels(ctx, monitoring.MainPanels, start, time.Now(), t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).To(HaveLen(len(monitoring.MainPanels)))
		for _, f := range files {
			g.Expect(drawsFirstLine(f)).To(BeTrue(), "%s shows no data", f)
		}
	})

	g.Expect(c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}})).To(Succeed())
	g.Eventually(func() []promv1.Alert { return firing(ctx, g, "CAPKVMachineStuck") }).
		WithTimeout(within).WithPolling(time.Second).Should(BeEmpty(), "resolved once the stuck machine is gone")
}

// drawsFirstLine reports whether the PNG file at path has pixels of the
// colour of a panel's first line.
func drawsFirstLine(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return false, err
	}
	want := color.RGBAModel.Convert(plotutil.Color(0)).(color.RGBA)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == want {
				return true, nil
			}
		}
	}
	return false, nil
}

// anonymousScrape is the status of a scrape of the provider's endpoint
// without a token, 0 while nothing answers.
func anonymousScrape(ctx context.Context) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return 0
	}
	// The endpoint's certificate is self-signed, as the ServiceMonitor says.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// nodesJoined counts the Machines of a cluster whose Node joined.
func nodesJoined(ctx context.Context, ns, cluster string) func(Gomega) int {
	return func(g Gomega) int {
		machines := &clusterv1.MachineList{}
		g.Expect(w.Env.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
		joined := 0
		for _, m := range machines.Items {
			if m.Status.NodeRef.IsDefined() {
				joined++
			}
		}
		return joined
	}
}

func machinesOf(ctx context.Context, g Gomega, ns, cluster string) []infrav1.KubevirtMachine {
	kms := &infrav1.KubevirtMachineList{}
	g.Expect(w.Env.Client.List(ctx, kms, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	return kms.Items
}

// firing lists the firing alerts of a name.
func firing(ctx context.Context, g Gomega, name string) []promv1.Alert {
	result, err := prom.API.Alerts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var out []promv1.Alert
	for _, a := range result.Alerts {
		if string(a.Labels[model.AlertNameLabel]) == name && a.State == promv1.AlertStateFiring {
			out = append(out, a)
		}
	}
	return out
}

// samples counts the samples, NaN left out, that a query returns over the
// test so far at a 2s step, with the dashboard's rate interval as Grafana
// would set it for a longer scrape interval.
func samples(ctx context.Context, t *testing.T, expr string, since time.Time) int {
	t.Helper()
	value, _, err := prom.API.QueryRange(ctx, monitoring.Expand(expr, 30*time.Second),
		promv1.Range{Start: since, End: time.Now(), Step: 2 * time.Second})
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), expr)
	matrix, ok := value.(model.Matrix)
	NewWithT(t).Expect(ok).To(BeTrue(), "%s returned %s", expr, value.Type())
	n := 0
	for _, series := range matrix {
		for _, s := range series.Values {
			if !math.IsNaN(float64(s.Value)) {
				n++
			}
		}
	}
	return n
}

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

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestMetricsFollowMachines provisions machines from a golden image and
// reads the provider's metrics from the registry its manager serves: the
// machines are counted by phase, their provisioning and stages are timed,
// the clones and the import are counted, and no label value names any
// object.
func TestMetricsFollowMachines(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	provisionings := sampleCount(t, "capkv_machine_provisioning_seconds", nil)
	clones := sampleCount(t, "capkv_golden_image_clones_total", nil)
	scheduling := sampleCount(t, "capkv_machine_stage_seconds", map[string]string{metrics.StageLabel: metrics.StageScheduling})
	image := "https://images.example/metrics-" + tc.ns + ".qcow2"
	var names []string
	for i := range 3 {
		km := tc.newMachine(t, fixture.MachineOptions{Name: fmt.Sprintf("obs-%d", i), Mutate: withImage(image, "")})
		names = append(names, km.Name)
	}
	for _, name := range names {
		eventually(t, tc.provisioned(&infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: name}})).Should(Succeed())
	}
	g.Expect(sampleCount(t, "capkv_machine_provisioning_seconds", nil) - provisionings).To(BeEquivalentTo(3))
	g.Expect(sampleCount(t, "capkv_golden_image_clones_total", nil)-clones).To(BeEquivalentTo(3), "one clone per machine, by CDI's method")
	g.Expect(sampleCount(t, "capkv_machine_stage_seconds", map[string]string{metrics.StageLabel: metrics.StageScheduling})-scheduling).
		To(BeNumerically(">=", 3), "every machine waited to be scheduled")
	g.Expect(sampleCount(t, "capkv_machines", map[string]string{metrics.PhaseLabel: metrics.PhaseProvisioned})).To(BeNumerically(">=", 3))
	g.Expect(sampleCount(t, "capkv_infra_cluster_request_duration_seconds", map[string]string{metrics.InfraClusterLabel: metrics.ManagementCluster})).
		To(BeNumerically(">", 0))
	g.Expect(sampleCount(t, "capkv_infra_cluster_users", map[string]string{metrics.InfraClusterLabel: metrics.ManagementCluster, metrics.ReasonLabel: infrav1.AvailableReason})).
		To(BeNumerically(">=", 4), "the cluster and its machines")
	eventually(t, func() float64 { return sampleCount(t, "capkv_golden_image_volumes", nil) }).Should(BeNumerically(">=", 1))

	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "capkv_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				// infra_cluster names a kubeconfig Secret, which may sit
				// in a tenant's namespace: one per infra cluster, not per
				// object.
				g.Expect(l.GetValue()).NotTo(BeElementOf(append(names, tc.ns, tc.cluster.Name, tc.kc.Name)),
					"%s{%s} names an object", f.GetName(), l.GetName())
				if l.GetName() != metrics.InfraClusterLabel {
					g.Expect(l.GetValue()).NotTo(ContainSubstring(tc.ns), "%s{%s} names a namespace", f.GetName(), l.GetName())
				}
			}
		}
	}
}

// sampleCount adds up, over the series of a metric whose labels include
// match, the value of a counter or gauge or the observations of a
// histogram.
func sampleCount(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, match) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(match)
}

// TestKubectlGetColumns reads KubevirtClusters and KubevirtMachines as
// kubectl get does, as a server-side Table, and checks that the columns
// tell the state at a glance.
func TestKubectlGetColumns(t *testing.T) {
	tc := ownedCluster(t, nil)
	eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
	km := tc.newMachine(t, fixture.MachineOptions{Name: "columns-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())

	eventually(t, func() map[string]string { return tableRow(t, tc.ns, "kubevirtmachines", km.Name) }).Should(And(
		HaveKeyWithValue("Ready", "True"),
		HaveKeyWithValue("Reason", infrav1.ReadyReason),
		HaveKeyWithValue("VM", infrav1.ProviderIDPrefix+km.Name),
		// Shown once the tenant Node, which no guest registers in this
		// world, carries the infra node's labels.
		HaveKey("Infra Node"),
		HaveKeyWithValue("Node", infrav1.WaitingForNodeReason),
		HaveKeyWithValue("IP", Not(BeEmpty())),
		HaveKeyWithValue("Bootstrap", infrav1.SucceededReason),
		HaveKey("Age")))
	eventually(t, func() map[string]string { return tableRow(t, tc.ns, "kubevirtclusters", tc.kc.Name) }).Should(And(
		HaveKeyWithValue("Endpoint", Not(BeEmpty())),
		HaveKeyWithValue("Isolation", infrav1.AppliedReason),
		HaveKeyWithValue("Infra", infrav1.AvailableReason),
		HaveKey("Age")))
}

// tableRow is the row of one object in the Table the API server serves
// kubectl get, by column name.
func tableRow(t *testing.T, ns, resource, name string) map[string]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(w.Env.Config)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().AbsPath("/apis", infrav1.GroupVersion.Group, infrav1.GroupVersion.Version, "namespaces", ns, resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Raw()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	table := &metav1.Table{}
	NewWithT(t).Expect(json.Unmarshal(raw, table)).To(Succeed())
	NewWithT(t).Expect(table.Rows).To(HaveLen(1))
	row := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		row[c.Name] = ""
		if v := table.Rows[0].Cells[i]; v != nil {
			row[c.Name] = fmt.Sprint(v)
		}
	}
	return row
}

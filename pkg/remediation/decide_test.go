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

package remediation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	machine := func(mutate ...func(*clusterv1.Machine)) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "md-0-abc"}, Spec: clusterv1.MachineSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtMachine", Name: "md-0-abc"}}}
		for _, f := range mutate {
			f(m)
		}
		return m
	}
	healthy := func(m *clusterv1.Machine) {
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionTrue}}
	}
	kvm := func(spec kubevirtv1.VirtualMachineSpec) *infrav1.KubevirtMachine {
		return &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "md-0-abc"},
			Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: spec}}}
	}
	always := kvm(kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways)})
	rem := func(limit, timeout, count int32, last time.Duration, phase infrav1.KubevirtRemediationPhase) *infrav1.KubevirtRemediation {
		r := &infrav1.KubevirtRemediation{ObjectMeta: metav1.ObjectMeta{Name: "md-0-abc"},
			Spec:   infrav1.KubevirtRemediationSpec{RetryLimit: limit, TimeoutSeconds: timeout},
			Status: infrav1.KubevirtRemediationStatus{RetryCount: count, Phase: phase}}
		if count > 0 {
			r.Status.LastRemediated = metav1.NewTime(now.Add(-last))
		}
		return r
	}
	tests := []struct {
		name  string
		rem   *infrav1.KubevirtRemediation
		m     *clusterv1.Machine
		km    *infrav1.KubevirtMachine
		step  step
		after time.Duration
		why   string
	}{
		{name: "no Machine", rem: rem(2, 60, 0, 0, ""), km: always, step: waitForMachine, why: "Machine md-0-abc does not exist"},
		{name: "no KubevirtMachine", rem: rem(2, 60, 0, 0, ""), m: machine(), step: waitForMachine, why: "KubevirtMachine md-0-abc"},
		{name: "another provider's machine", rem: rem(2, 60, 0, 0, ""), m: machine(func(m *clusterv1.Machine) {
			m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: "x"}
		}), step: refuse, why: "DockerMachine"},
		{name: "first restart", rem: rem(2, 60, 0, 0, ""), m: machine(), km: always, step: restart},
		{name: "no run strategy is Always", rem: rem(2, 60, 0, 0, ""), m: machine(), km: kvm(kubevirtv1.VirtualMachineSpec{}), step: restart},
		{name: "running: true", rem: rem(2, 60, 0, 0, ""), m: machine(), km: kvm(kubevirtv1.VirtualMachineSpec{Running: ptr.To(true)}), step: restart},
		{name: "running: false", rem: rem(2, 60, 0, 0, ""), m: machine(), km: kvm(kubevirtv1.VirtualMachineSpec{Running: ptr.To(false)}), step: refuse, why: "running: false"},
		{name: "RerunOnFailure", rem: rem(2, 60, 0, 0, ""), m: machine(),
			km: kvm(kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyRerunOnFailure)}), step: refuse, why: "runStrategy RerunOnFailure"},
		{name: "within the timeout", rem: rem(2, 60, 1, 20*time.Second, infrav1.RemediationPhaseWaiting), m: machine(), km: always, step: wait, after: 40 * time.Second},
		{name: "timed out, retries left", rem: rem(2, 60, 1, 61*time.Second, infrav1.RemediationPhaseWaiting), m: machine(), km: always, step: restart},
		{name: "timed out, none left", rem: rem(2, 60, 2, 60*time.Second, infrav1.RemediationPhaseWaiting), m: machine(), km: always, step: giveUp,
			why: "2 restart(s) of the VM did not make Machine md-0-abc healthy within 60s each"},
		{name: "timed out but healthy: the MachineHealthCheck is about to delete it", rem: rem(1, 60, 1, 90*time.Second, infrav1.RemediationPhaseWaiting),
			m: machine(healthy), km: always, step: wait, after: 60 * time.Second},
		{name: "defaults: one restart, 300s", rem: rem(0, 0, 1, 299*time.Second, infrav1.RemediationPhaseWaiting), m: machine(), km: always, step: wait, after: time.Second},
		{name: "defaults: timed out after one restart", rem: rem(0, 0, 1, 300*time.Second, infrav1.RemediationPhaseWaiting), m: machine(), km: always, step: giveUp},
		{name: "failed stays failed", rem: rem(2, 60, 2, time.Hour, infrav1.RemediationPhaseFailed), m: machine(), km: always, step: stayFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(tt.rem, tt.m, tt.km, now)
			if d.step != tt.step || d.after != tt.after || !strings.Contains(d.why, tt.why) {
				t.Errorf("decide = step %d after %v (%q), want step %d after %v (%q)", d.step, d.after, d.why, tt.step, tt.after, tt.why)
			}
		})
	}
}

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
	"fmt"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// step is what a reconcile does next.
type step int

const (
	// waitForMachine: the Machine or its KubevirtMachine is missing.
	waitForMachine step = iota
	// restart asks for the VM to be restarted (again).
	restart
	// wait: a restart was asked for; the timeout has not passed yet, or
	// the Machine looks healthy and the MachineHealthCheck is about to
	// delete the remediation.
	wait
	// giveUp hands the Machine back after retryLimit restarts.
	giveUp
	// refuse hands the Machine back at once: its VM would not restart.
	refuse
	// stayFailed keeps a failed remediation handed back.
	stayFailed
)

// decision is the next step, why, and for wait how long.
type decision struct {
	step  step
	why   string
	after time.Duration
}

// decide is the whole policy of a remediation, without side effects: from
// its status, its Machine and KubevirtMachine (nil when missing) and the
// time, the next step.
func decide(rem *infrav1.KubevirtRemediation, m *clusterv1.Machine, km *infrav1.KubevirtMachine, now time.Time) decision {
	st := &rem.Status
	switch {
	case st.Phase == infrav1.RemediationPhaseFailed:
		return decision{step: stayFailed}
	case m == nil:
		return decision{step: waitForMachine, why: fmt.Sprintf("Machine %s does not exist", rem.Name)}
	case !isKubevirtMachine(m.Spec.InfrastructureRef):
		return decision{step: refuse, why: fmt.Sprintf("the infrastructure of Machine %s is a %s, not a KubevirtMachine", m.Name, m.Spec.InfrastructureRef.Kind)}
	case km == nil:
		return decision{step: waitForMachine, why: fmt.Sprintf("KubevirtMachine %s of Machine %s does not exist", m.Spec.InfrastructureRef.Name, m.Name)}
	}
	if ok, runStrategy := restartable(km); !ok {
		return decision{step: refuse, why: fmt.Sprintf("the VirtualMachine of KubevirtMachine %s has runStrategy %s: KubeVirt would not start it again after a restart (only Always restarts)", km.Name, runStrategy)}
	}
	if st.RetryCount == 0 || st.LastRemediated.IsZero() {
		return decision{step: restart}
	}
	timeout := time.Duration(timeoutSeconds(rem)) * time.Second
	if left := st.LastRemediated.Add(timeout).Sub(now); left > 0 {
		return decision{step: wait, after: left}
	}
	if conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition) {
		// Healthy again: the MachineHealthCheck deletes the remediation
		// on its next pass. Look again a timeout later, in case it does not.
		return decision{step: wait, after: timeout}
	}
	if st.RetryCount < retryLimit(rem) {
		return decision{step: restart}
	}
	return decision{step: giveUp, why: fmt.Sprintf("%d restart(s) of the VM did not make Machine %s healthy within %ds each", st.RetryCount, m.Name, timeoutSeconds(rem))}
}

// isKubevirtMachine reports whether a Machine's infrastructure is a
// KubevirtMachine of this provider.
func isKubevirtMachine(ref clusterv1.ContractVersionedObjectReference) bool {
	return ref.Kind == "KubevirtMachine" && ref.APIGroup == infrav1.GroupVersion.Group && ref.Name != ""
}

// restartable reports whether the KubevirtMachine's VM starts again when
// its instance is deleted, and its run strategy for the message. Neither
// running nor runStrategy set means Always: the provider adds it.
func restartable(km *infrav1.KubevirtMachine) (bool, string) {
	spec := km.Spec.VirtualMachineTemplate.Spec
	switch {
	case spec.RunStrategy != nil:
		return vmstatus.Restartable(&kubevirtv1.VirtualMachine{Spec: spec}), string(*spec.RunStrategy)
	case spec.Running != nil:
		if *spec.Running {
			return true, string(kubevirtv1.RunStrategyAlways)
		}
		return false, string(kubevirtv1.RunStrategyHalted) + " (running: false)"
	}
	return true, string(kubevirtv1.RunStrategyAlways)
}

// retryLimit is spec.retryLimit, or its default when left out.
func retryLimit(rem *infrav1.KubevirtRemediation) int32 {
	if rem.Spec.RetryLimit > 0 {
		return rem.Spec.RetryLimit
	}
	return infrav1.DefaultRemediationRetryLimit
}

// timeoutSeconds is spec.timeoutSeconds, or its default when left out.
func timeoutSeconds(rem *infrav1.KubevirtRemediation) int32 {
	if rem.Spec.TimeoutSeconds > 0 {
		return rem.Spec.TimeoutSeconds
	}
	return infrav1.DefaultRemediationTimeoutSeconds
}

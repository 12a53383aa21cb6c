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

// This file sets every KubevirtMachinePool condition:
// VirtualMachinePoolReady and CapacityKnown, which the pool service owns,
// and InfraClusterAvailable, Paused and the Ready summary, which the
// controller sets through it (docs/status_test.go holds it); and the
// pool's reported fields: provisioned, its VirtualMachinePool, its
// instances' providerIDs and counts, and one instance's capacity.

package machinepool

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
)

// record sets VirtualMachinePoolReady from o, with an Event when it
// changes; an error without an outcome leaves it as it was.
func (s *Service) record(p *infrav1.KubevirtMachinePool, o outcome.Outcome) {
	if o.Reason != "" {
		outcome.Record(s.Recorder, p, infrav1.VirtualMachinePoolReadyCondition, o)
	}
}

// Summarize sets Ready from InfraClusterAvailable and
// VirtualMachinePoolReady, those present.
func Summarize(p *infrav1.KubevirtMachinePool) {
	outcome.Summarize(p, []string{infrav1.InfraClusterAvailableCondition, infrav1.VirtualMachinePoolReadyCondition})
}

// RecordInfraAccess sets InfraClusterAvailable from whether the pool's
// infra cluster can be used, with an Event when it cannot: the rule every
// kind follows (infracluster.Access).
func RecordInfraAccess(recorder events.EventRecorder, p *infrav1.KubevirtMachinePool, access infracluster.Access) {
	outcome.RecordWarning(recorder, p, infrav1.InfraClusterAvailableCondition, access.Outcome)
}

// MarkNotPaused sets Paused False: the pool's Cluster is not paused. A
// paused one sets it through Cluster API's util/paused in the controller,
// which writes at once.
func MarkNotPaused(p *infrav1.KubevirtMachinePool) {
	outcome.MarkNotPaused(p)
}

// recordProvisioned reports the pool provisioned once its
// VirtualMachinePool key exists: Cluster API then reads the instances.
func recordProvisioned(p *infrav1.KubevirtMachinePool, key types.NamespacedName) {
	p.Status.VirtualMachinePool = key.String()
	p.Status.Ready = true
	p.Status.Initialization.Provisioned = ptr.To(true)
	p.Status.InfrastructureMachineKind = InfrastructureMachineKind
}

// recordInstances reports the providerIDs of the pool's VMs, sorted, and
// how many exist and are ready.
func recordInstances(p *infrav1.KubevirtMachinePool, ids []string, ready int32) {
	p.Spec.ProviderIDList = ids
	p.Status.Replicas, p.Status.ReadyReplicas = int32(len(ids)), ready
}

// recordCapacity reports what one instance of the pool offers, for the
// cluster autoscaler, and whether it is known; an unknown capacity is
// cleared rather than left stale.
func recordCapacity(p *infrav1.KubevirtMachinePool, res capacity.Result) {
	p.Status.Capacity, p.Status.NodeInfo = res.Capacity, res.NodeInfo
	if !res.Known() {
		p.Status.Capacity = nil
		outcome.Set(p, infrav1.CapacityKnownCondition, outcome.Fail(res.Reason, res.Message))
		return
	}
	outcome.Set(p, infrav1.CapacityKnownCondition, outcome.Ready(res.Reason, res.Message))
}

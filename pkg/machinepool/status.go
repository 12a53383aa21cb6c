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

// This file sets the KubevirtMachinePool conditions: VirtualMachinePoolReady,
// which the pool service owns, and the Ready summary the controller asks
// for (docs/status_test.go holds it). InfraClusterAvailable and Paused are
// set as for every kind, by the controller's shared helpers.

package machinepool

import (
	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
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

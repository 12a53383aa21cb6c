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

package infracluster

import (
	"errors"
	"testing"
	"time"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

func TestDecide(t *testing.T) {
	local := func(s APIStatus) *Infra { return &Infra{Status: s} }
	external := func(s APIStatus) *Infra { return &Infra{Status: s, External: true} }
	unreachable := APIStatus{Reason: infrav1.InfraClusterUnreachableReason, Message: "dial tcp: refused"}
	noKubeVirt := APIStatus{Reason: infrav1.KubeVirtNotInstalledReason, Message: "install KubeVirt"}
	noCDI := APIStatus{Reason: infrav1.CDINotInstalledReason, Message: "install CDI"}
	tests := []struct {
		name      string
		infra     *Infra
		err       error
		state     outcome.State
		reason    string
		requeue   time.Duration
		available bool
		reachable bool
	}{
		{name: "config error", err: configError(errors.New("infra cluster Secret ns/kc has no \"kubeconfig\" key")),
			state: outcome.Failed, reason: infrav1.InfraClusterSecretInvalidReason, requeue: RetryUnannounced},
		{name: "secret unreadable", err: errors.New("reading infra cluster Secret ns/kc: timeout"),
			state: outcome.Failed, reason: infrav1.InfraClusterUnreachableReason, requeue: RetryUnannounced},
		{name: "local unreachable", infra: local(unreachable),
			state: outcome.Failed, reason: infrav1.InfraClusterUnreachableReason, requeue: RetryUnannounced},
		{name: "external unreachable", infra: external(unreachable),
			state: outcome.Failed, reason: infrav1.InfraClusterUnreachableReason, requeue: RetryUnannounced},
		{name: "local without KubeVirt waits for the CRD watch", infra: local(noKubeVirt),
			state: outcome.Failed, reason: infrav1.KubeVirtNotInstalledReason, reachable: true},
		{name: "external without CDI looks again", infra: external(noCDI),
			state: outcome.Failed, reason: infrav1.CDINotInstalledReason, requeue: RetryUnannounced, reachable: true},
		{name: "local available", infra: local(servedStatus),
			state: outcome.Done, reason: infrav1.AvailableReason, available: true, reachable: true},
		{name: "external available", infra: external(servedStatus),
			state: outcome.Done, reason: infrav1.AvailableReason, available: true, reachable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := decide(tt.infra, tt.err)
			if a.Outcome.State != tt.state || a.Outcome.Reason != tt.reason || a.Outcome.RequeueAfter != tt.requeue {
				t.Errorf("outcome = %s/%s after %v, want %s/%s after %v",
					a.Outcome.State, a.Outcome.Reason, a.Outcome.RequeueAfter, tt.state, tt.reason, tt.requeue)
			}
			if a.Available() != tt.available || a.Reachable() != tt.reachable {
				t.Errorf("available=%v reachable=%v, want %v %v", a.Available(), a.Reachable(), tt.available, tt.reachable)
			}
			if a.Outcome.Message == "" {
				t.Error("the outcome has no message")
			}
		})
	}
}

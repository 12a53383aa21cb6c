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

package evacuation

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmstatus"
)

// RecordMigration mirrors what KubeVirt says of live migration onto the
// machine: whether the instance can migrate, and how its last migration
// went, with an Event when either changes. Until KubeVirt reports one, the
// condition is left as it is, so that an instance being replaced does not
// make the machine's status flap.
func (s *Evacuator) RecordMigration(km *infrav1.KubevirtMachine, vmi *kubevirtv1.VirtualMachineInstance) {
	if vmi == nil {
		return
	}
	if c, ok := vmstatus.LiveMigratable(vmi); ok {
		conditions.Set(km, c)
	}
	c, ok := vmstatus.Migration(vmi)
	if !ok {
		return
	}
	if prev := conditions.Get(km, infrav1.MigratingCondition); prev != nil && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
		return
	}
	conditions.Set(km, c)
	eventType := corev1.EventTypeNormal
	if c.Reason == infrav1.MigrationFailedReason {
		eventType = corev1.EventTypeWarning
	}
	s.Recorder.Eventf(km, vmi, eventType, c.Reason, "LiveMigrate", "%s", c.Message)
}

// conditionSet says whether a condition of that type is set with this
// status and reason.
func conditionSet(km *infrav1.KubevirtMachine, t string, status metav1.ConditionStatus, reason string) bool {
	c := conditions.Get(km, t)
	return c != nil && c.Status == status && c.Reason == reason
}

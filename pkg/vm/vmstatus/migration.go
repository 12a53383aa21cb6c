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

package vmstatus

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// LiveMigratable is the instance's own LiveMigratable condition as a
// KubevirtMachine condition; ok is false while virt-handler has not
// reported it.
func LiveMigratable(vmi *kubevirtv1.VirtualMachineInstance) (metav1.Condition, bool) {
	c := Condition(vmi, kubevirtv1.VirtualMachineInstanceIsMigratable)
	if c == nil {
		return metav1.Condition{}, false
	}
	reason := c.Reason
	if reason == "" {
		reason = infrav1.MigratableReason
		if c.Status != corev1.ConditionTrue {
			reason = infrav1.NotMigratableReason
		}
	}
	msg := c.Message
	if msg == "" && c.Status == corev1.ConditionTrue {
		msg = "KubeVirt can live-migrate the VM to another infra node"
	}
	return metav1.Condition{Type: infrav1.LiveMigratableCondition, Status: metav1.ConditionStatus(c.Status), Reason: reason, Message: msg}, true
}

// Migration is the Migrating condition for the instance's last live
// migration; ok is false when it never migrated.
func Migration(vmi *kubevirtv1.VirtualMachineInstance) (metav1.Condition, bool) {
	m := vmi.Status.MigrationState
	if m == nil || m.SourceNode == "" && m.TargetNode == "" {
		return metav1.Condition{}, false
	}
	c := metav1.Condition{Type: infrav1.MigratingCondition}
	switch {
	case m.Failed:
		c.Status, c.Reason = metav1.ConditionFalse, infrav1.MigrationFailedReason
		c.Message = fmt.Sprintf("live migration %s from %s to %s failed; the VM runs on %s", m.MigrationUID, m.SourceNode, m.TargetNode, vmi.Status.NodeName)
		if m.FailureReason != "" {
			c.Message += ": " + m.FailureReason
		}
	case m.Completed:
		c.Status, c.Reason = metav1.ConditionFalse, infrav1.MigrationSucceededReason
		c.Message = fmt.Sprintf("live migration %s moved the VM from %s to %s", m.MigrationUID, m.SourceNode, m.TargetNode)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, infrav1.MigrationRunningReason
		c.Message = fmt.Sprintf("live migration %s from %s to %s in progress", m.MigrationUID, m.SourceNode, orUnknown(m.TargetNode))
	}
	return c, true
}

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

package outcome

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Summarize sets Ready from the given conditions, those present, with
// Cluster API's default merge strategy and its generic Ready, NotReady and
// ReadyUnknown reasons. A True Ready carries no message, as Cluster API's
// own conditions in their normal state do: Cluster API mirrors it into the
// Cluster's and Machine's conditions, whose summaries (and its e2e
// framework's VerifyClusterAvailable and VerifyMachinesReady) read any
// message there as something to look at. The conditions summarized keep
// their messages for clusterctl describe --show-conditions all.
func Summarize(obj Object, types []string) {
	strategy := conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
		conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(
			infrav1.NotReadyReason, infrav1.ReadyUnknownReason, infrav1.ReadyReason)))}
	var present []string
	for _, t := range types {
		if conditions.Has(obj, t) {
			present = append(present, t)
		}
	}
	if len(present) == 0 {
		return
	}
	if err := conditions.SetSummaryCondition(obj, obj, infrav1.ReadyCondition, conditions.ForConditionTypes(present), strategy); err != nil {
		conditions.Set(obj, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionUnknown,
			Reason: infrav1.InternalErrorReason, Message: "summarizing conditions: " + err.Error()})
		return
	}
	if ready := conditions.Get(obj, infrav1.ReadyCondition); ready.Status == metav1.ConditionTrue && ready.Message != "" {
		ready.Message = ""
		conditions.Set(obj, *ready)
	}
}

// MarkNotPaused records that the object's Cluster is not paused with the
// rest of the status, rather than in a write of its own as Cluster API's
// paused.EnsurePausedCondition does; a paused Cluster goes through that
// instead, which writes at once.
func MarkNotPaused(obj Object) {
	if c := conditions.Get(obj, clusterv1.PausedCondition); c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == obj.GetGeneration() {
		return
	}
	conditions.Set(obj, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.NotPausedReason, ObservedGeneration: obj.GetGeneration()})
}

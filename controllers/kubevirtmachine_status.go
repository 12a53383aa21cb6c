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

package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// writeBack stores what a reconcile changed (patchOnce). The status of a
// machine still provisioning may be held back (statuspacing.Keeper.Hold);
// the returned duration is when to look again to write it.
func (r *KubevirtMachineReconciler) writeBack(ctx context.Context, stored, km *infrav1.KubevirtMachine, o outcome.Outcome) (time.Duration, error) {
	held := r.StatusPacing.Hold(stored, km, o, time.Now())
	write := held == 0 && !equality.Semantic.DeepEqual(stored.Status, km.Status)
	key := client.ObjectKeyFromObject(km)
	var sum writtenStatus
	if write {
		// Summed only for a write: most reconciles write nothing.
		sum = writtenStatus{uid: km.UID, sum: statusSum(&km.Status)}
		if last, ok := r.written.Load(key); ok && last == sum {
			// This process wrote exactly this status last; the cache has
			// not seen that write yet when another event brings the
			// machine back.
			write = false
		}
	}
	if log := ctrl.LoggerFrom(ctx).V(4); write && log.Enabled() {
		log.Info("Writing status", "changed", statusChanges(&stored.Status, &km.Status))
	}
	if err := patchOnce(ctx, r.Client, stored, km, write); err != nil {
		r.written.Delete(key)
		return held, err
	}
	if write {
		r.written.Store(key, sum)
	}
	return held, nil
}

// writtenStatus is the status this process last wrote for a machine.
type writtenStatus struct {
	uid types.UID
	sum [sha256.Size]byte
}

// statusSum identifies a status, to remember what was written last without
// keeping a copy of every machine's status.
func statusSum(status *infrav1.KubevirtMachineStatus) [sha256.Size]byte {
	raw, _ := json.Marshal(status)
	return sha256.Sum256(raw)
}

// statusChanges names what differs between two statuses, for the log: the
// fields, and the conditions by type.
func statusChanges(before, after *infrav1.KubevirtMachineStatus) []string {
	var changed []string
	b, a := map[string]any{}, map[string]any{}
	for from, to := range map[*infrav1.KubevirtMachineStatus]*map[string]any{before: &b, after: &a} {
		raw, _ := json.Marshal(from)
		_ = json.Unmarshal(raw, to)
	}
	for k := range a {
		if k != "conditions" && !reflect.DeepEqual(a[k], b[k]) {
			changed = append(changed, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			changed = append(changed, k)
		}
	}
	for _, c := range after.Conditions {
		if prev := meta.FindStatusCondition(before.Conditions, c.Type); prev == nil ||
			prev.Status != c.Status || prev.Reason != c.Reason || prev.Message != c.Message || prev.ObservedGeneration != c.ObservedGeneration {
			changed = append(changed, "conditions."+c.Type+"="+c.Reason)
		}
	}
	sort.Strings(changed)
	return changed
}

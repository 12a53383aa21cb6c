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

package tenantdrain

import (
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRefusal(t *testing.T) {
	budget := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	budget.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: "The disruption budget web needs 2 healthy pods and has 2 currently"}}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{name: "a budget names itself", err: budget, want: "The disruption budget web needs 2 healthy pods and has 2 currently"},
		{name: "wrapped", err: fmt.Errorf("evicting: %w", budget), want: "The disruption budget web needs 2 healthy pods and has 2 currently"},
		{name: "no cause", err: apierrors.NewTooManyRequests("Evacuation in progress", 0), want: "Evacuation in progress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusal(tt.err); got != tt.want {
				t.Errorf("refusal = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResultDone(t *testing.T) {
	if !(Result{}).Done() {
		t.Error("an empty result is done")
	}
	if (Result{Remaining: []string{"a/b"}}).Done() {
		t.Error("a result with remaining pods is not done")
	}
}

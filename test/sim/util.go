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

package sim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// workers is how many objects of a kind the simulator handles at once.
const workers = 4

func concurrency() controller.Options { return controller.Options{MaxConcurrentReconciles: workers} }

// warn records a Warning Event as KubeVirt, CDI or a CSI driver would.
func (s *Simulator) warn(ctx context.Context, obj client.Object, reason, message string) {
	gvk, err := s.client.GroupVersionKindFor(obj)
	if err != nil {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(),
			Namespace: obj.GetNamespace(), UID: obj.GetUID(),
		},
		Type: corev1.EventTypeWarning, Reason: reason, Message: message,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "sim"},
	}
	if err := s.client.Create(ctx, ev); err != nil {
		s.log.V(1).Info("recording event", "reason", reason, "error", fmt.Sprint(err))
	}
}

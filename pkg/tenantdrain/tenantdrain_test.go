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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestEvictable(t *testing.T) {
	owned := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: "x", Controller: ptr.To(true)}}
	}
	for _, tt := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "bare pod", pod: corev1.Pod{}, want: true},
		{name: "ReplicaSet pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("ReplicaSet")}}, want: true},
		{name: "DaemonSet pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("DaemonSet")}}, want: false},
		{name: "mirror pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{mirrorPodAnnotation: "x"}}}, want: false},
		{name: "succeeded", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, want: false},
		{name: "failed", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, want: false},
		{name: "running", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Evictable(&tt.pod); got != tt.want {
				t.Errorf("Evictable = %v, want %v", got, tt.want)
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

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

package movable

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBlockIfLocalInfra(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		local       bool
		want        map[string]string
		changed     bool
	}{
		{name: "local infra gets the block", local: true, want: map[string]string{BlockAnnotation: BlockedLocalInfra}, changed: true},
		{name: "local infra keeps a block of its own value", local: true, annotations: map[string]string{BlockAnnotation: BlockedLocalInfra},
			want: map[string]string{BlockAnnotation: BlockedLocalInfra}},
		{name: "local infra keeps another controller's block", local: true, annotations: map[string]string{BlockAnnotation: "draining"},
			want: map[string]string{BlockAnnotation: "draining"}},
		{name: "external infra drops our block", annotations: map[string]string{BlockAnnotation: BlockedLocalInfra, "a": "b"},
			want: map[string]string{"a": "b"}, changed: true},
		{name: "external infra leaves another block", annotations: map[string]string{BlockAnnotation: "draining"},
			want: map[string]string{BlockAnnotation: "draining"}},
		{name: "external infra without annotations", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := BlockIfLocalInfra(obj, tc.local); got != tc.changed {
				t.Errorf("changed = %t, want %t", got, tc.changed)
			}
			if len(obj.Annotations) != len(tc.want) {
				t.Fatalf("annotations %v, want %v", obj.Annotations, tc.want)
			}
			for k, v := range tc.want {
				if obj.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, obj.Annotations[k], v)
				}
			}
		})
	}
}

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

package e2e

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// TestIsConflict: the proxy applies again only when every error of the
// framework's aggregate is a conflict.
func TestIsConflict(t *testing.T) {
	clusters := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}
	conflict := apierrors.NewConflict(clusters, "blue", errors.New("the object has been modified"))
	invalid := apierrors.NewBadRequest("strict decoding error")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a conflict", conflict, true},
		{"the framework's aggregate of one", kerrors.NewAggregate([]error{conflict}), true},
		{"a conflict beside another error", kerrors.NewAggregate([]error{conflict, invalid}), false},
		{"another error", invalid, false},
		{"none", nil, false},
	} {
		if got := isConflict(tc.err); got != tc.want {
			t.Errorf("%s: isConflict = %t, want %t", tc.name, got, tc.want)
		}
	}
}

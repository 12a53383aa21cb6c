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

package machinepool

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memo remembers, per KubevirtMachinePool, the bootstrap data last read and
// the pool whose user data Secret last received it. Secrets are read
// uncached; a pool reconciles on every event of its VMs, and without the
// memo each would read two Secrets.
type memo struct {
	mu    sync.Mutex
	pools map[types.NamespacedName]remembered
}

type remembered struct {
	// versions are the resourceVersions of the Secrets the data came from.
	versions string
	data     *bootstrapData
	// writtenFor is the UID of the VirtualMachinePool whose Secret holds
	// data.
	writtenFor types.UID
}

func (m *memo) get(key types.NamespacedName) remembered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pools[key]
}

func (m *memo) set(key types.NamespacedName, r remembered) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools == nil {
		m.pools = map[types.NamespacedName]remembered{}
	}
	m.pools[key] = r
}

// Forget drops what is remembered of a pool, once it is gone.
func (s *Service) Forget(key types.NamespacedName) {
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	delete(s.memo.pools, key)
	s.pending.forget(key)
}

// versionsOf are the resourceVersions of the named Secrets in namespace ns,
// read from the manager's cache of Secret metadata; "" for a missing one.
func versionsOf(ctx context.Context, c client.Reader, ns string, names ...string) (string, error) {
	var out string
	for _, name := range names {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m); client.IgnoreNotFound(err) != nil {
			return "", err
		}
		out += name + "@" + m.ResourceVersion + ";"
	}
	return out, nil
}

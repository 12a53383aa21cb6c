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
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// pendingDeletions remembers, per pool, the Machines and VMs this process
// deleted until its cache shows them deleted, so that a reconcile on a
// stale cache does not count them as live and remove more instances than
// asked for (as a ReplicaSet's expectations do).
type pendingDeletions struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]map[types.UID]bool
}

func (p *pendingDeletions) add(pool types.NamespacedName, uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.uids == nil {
		p.uids = map[types.NamespacedName]map[types.UID]bool{}
	}
	if p.uids[pool] == nil {
		p.uids[pool] = map[types.UID]bool{}
	}
	p.uids[pool][uid] = true
}

// settle forgets the deletions the cache now shows: those of objects not
// among standing, the UIDs of the pool's Machines and VMs the cache has
// without a deletion timestamp. It returns what is still pending.
func (p *pendingDeletions) settle(pool types.NamespacedName, standing map[types.UID]bool) map[types.UID]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pending := map[types.UID]bool{}
	for uid := range p.uids[pool] {
		if standing[uid] {
			pending[uid] = true
		}
	}
	if len(pending) == 0 {
		delete(p.uids, pool)
	} else {
		p.uids[pool] = pending
	}
	return pending
}

func (p *pendingDeletions) forget(pool types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.uids, pool)
}

// standing are the UIDs of the instances' Machines and VMs that the cache
// shows without a deletion timestamp.
func standing(instances []instance, orphans []*clusterv1.Machine) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, i := range instances {
		if i.vm.DeletionTimestamp.IsZero() {
			out[i.vm.UID] = true
		}
		if i.machine != nil && i.machine.DeletionTimestamp.IsZero() {
			out[i.machine.UID] = true
		}
	}
	for _, m := range orphans {
		if m.DeletionTimestamp.IsZero() {
			out[m.UID] = true
		}
	}
	return out
}

// repair deletes the Machines of instances that are gone or broken, as
// the owner of MachinePool Machines: Cluster API's MachinePool controller
// makes Machines for the pool's KubevirtMachines but never deletes one,
// and a MachineHealthCheck only marks a Machine for its owner to
// remediate. Each deleted Machine's instance is then replaced by the pool.
func (s *Service) repair(ctx context.Context, sc *Scope, instances []instance, orphans []*clusterv1.Machine, pending map[types.UID]bool) (int, error) {
	var broken []instance
	var whys []string
	for _, i := range instances {
		if i.machine == nil || !i.machine.DeletionTimestamp.IsZero() || pending[i.machine.UID] {
			continue
		}
		switch {
		case !i.vm.DeletionTimestamp.IsZero():
			broken, whys = append(broken, i), append(whys, "its VM is being deleted")
		case i.km != nil && types.UID(i.km.Annotations[infrav1.PoolVMUIDAnnotation]) != i.vm.UID && i.km.DeletionTimestamp.IsZero():
			broken, whys = append(broken, i), append(whys, "its VM was replaced")
		case collections.IsUnhealthyAndOwnerRemediated(i.machine):
			broken, whys = append(broken, i), append(whys, "a MachineHealthCheck found it unhealthy")
		}
	}
	for n, i := range broken {
		if err := s.remove(ctx, sc, []instance{i}, whys[n]); err != nil {
			return 0, err
		}
	}
	removed := len(broken)
	for _, m := range orphans {
		if !m.DeletionTimestamp.IsZero() || pending[m.UID] {
			continue
		}
		// A Machine named after no VM in the cache: confirm with the API
		// server that its VM is gone.
		vm := &kubevirtv1.VirtualMachine{}
		err := sc.Access.Infra.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Key().Namespace, Name: m.Name}, vm)
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return 0, fmt.Errorf("reading VirtualMachine %s: %w", m.Name, err)
			}
			continue
		}
		if err := s.deleteMachine(ctx, sc, m, "its VM is gone"); err != nil {
			return 0, err
		}
		removed++
	}
	return removed, nil
}

// deleteMachine deletes a Machine of the pool, remembering it as pending.
func (s *Service) deleteMachine(ctx context.Context, sc *Scope, m *clusterv1.Machine, why string) error {
	if err := s.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Machine %s: %w", m.Name, err)
	}
	s.pending.add(client.ObjectKeyFromObject(sc.Pool), m.UID)
	s.Recorder.Eventf(sc.Pool, m, corev1.EventTypeNormal, "RemovingInstance", "RemoveInstance", "deleting Machine %s: %s", m.Name, why)
	return nil
}

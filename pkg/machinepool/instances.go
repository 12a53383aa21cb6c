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
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/poolbuilder"
)

// InfrastructureMachineKind is the kind of the machine each instance of a
// pool gets, for Cluster API's MachinePool Machines.
const InfrastructureMachineKind = "KubevirtMachine"

// instance is one VM of the pool with its KubevirtMachine and Machine, each
// nil until made.
type instance struct {
	vm      *kubevirtv1.VirtualMachine
	km      *infrav1.KubevirtMachine
	machine *clusterv1.Machine
}

// going reports whether the instance is on its way out: something of it
// is being deleted, or its KubevirtMachine still names a Machine the cache
// no longer has (Cluster API deletes the KubevirtMachine before the
// Machine goes).
func (i instance) going() bool {
	return !i.vm.DeletionTimestamp.IsZero() ||
		i.km != nil && !i.km.DeletionTimestamp.IsZero() ||
		i.machine != nil && !i.machine.DeletionTimestamp.IsZero() ||
		i.machine == nil && i.km != nil && metav1.GetControllerOf(i.km) != nil
}

// markedForDeletion reports whether the Machine carries Cluster API's
// delete-machine annotation, as the cluster autoscaler sets it.
func (i instance) markedForDeletion() bool {
	if i.machine == nil {
		return false
	}
	_, ok := i.machine.Annotations[clusterv1.DeleteMachineAnnotation]
	return ok
}

func (i instance) provisioned() bool {
	return i.km != nil && ptr.Deref(i.km.Status.Initialization.Provisioned, false)
}

// index is the VM's index in the pool (KubeVirt names VMs <pool>-<index>).
func (i instance) index() int {
	n, err := strconv.Atoi(i.vm.Name[strings.LastIndex(i.vm.Name, "-")+1:])
	if err != nil {
		return -1
	}
	return n
}

// removalOrder sorts instances by which goes first: those whose Machine is
// marked for deletion, then those made from an older template, then the
// highest index. The order depends on nothing that changes by itself, so a
// reconcile that reads a stale cache picks the same instances again rather
// than more.
func removalOrder(instances []instance, outdated func(instance) bool) []instance {
	sorted := slices.Clone(instances)
	rank := func(i instance) int {
		switch {
		case i.markedForDeletion():
			return 0
		case outdated(i):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(sorted, func(a, b instance) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return b.index() - a.index()
	})
	return sorted
}

// syncInstances gives each VM of the pool a KubevirtMachine, lets VMs go
// whose Machine is gone, removes instances above the MachinePool's
// replicas and replaces outdated instances one at a time. want is the pool
// as the provider wants it (its template hash tells outdated VMs). The
// outcome is done when nothing is under way.
func (s *Service) syncInstances(ctx context.Context, sc *Scope, want *poolv1.VirtualMachinePool, vms []kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	instances, orphans, err := s.instances(ctx, sc, vms)
	if err != nil {
		return outcome.Outcome{}, err
	}
	pending := s.pending.settle(client.ObjectKeyFromObject(sc.Pool), standing(instances, orphans))
	repaired, err := s.repair(ctx, sc, instances, orphans, pending)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if repaired > 0 {
		return outcome.Wait(infrav1.ReplacingMachineReason, fmt.Sprintf(
			"deleted the Machines of %d gone or unhealthy instance(s); the pool replaces them", repaired)), nil
	}
	var live []instance
	going := 0
	for _, i := range instances {
		if !i.vm.DeletionTimestamp.IsZero() {
			going++
			if err := s.release(ctx, sc, i); err != nil {
				return outcome.Outcome{}, err
			}
			continue
		}
		if err := s.ensureMachine(ctx, sc, &i); err != nil {
			return outcome.Outcome{}, err
		}
		if i.going() || pending[i.vm.UID] || i.machine != nil && pending[i.machine.UID] {
			going++
			continue
		}
		live = append(live, i)
	}
	outdated := func(i instance) bool { return poolbuilder.Outdated(want, i.vm) }
	desired := int(ptr.Deref(sc.MachinePool.Spec.Replicas, 1))
	if excess := len(live) - desired; excess > 0 {
		victims := removalOrder(live, outdated)[:excess]
		if err := s.remove(ctx, sc, victims, "the MachinePool asks for fewer replicas"); err != nil {
			return outcome.Outcome{}, err
		}
		return outcome.Wait(infrav1.ScalingReason, fmt.Sprintf("removing %d instance(s) for %d replicas: %s", excess, desired, names(victims))), nil
	}
	var stale []instance
	for _, i := range live {
		if outdated(i) {
			stale = append(stale, i)
		}
	}
	if len(stale) == 0 {
		return outcome.Ready("", ""), nil
	}
	msg := fmt.Sprintf("%d instance(s) run an older machine template; they are replaced one at a time", len(stale))
	for _, i := range live {
		if !i.provisioned() {
			going++
		}
	}
	if going > 0 || len(live) < desired {
		return outcome.Wait(infrav1.RollingReason, msg+", after the pool has all its instances up"), nil
	}
	next := removalOrder(stale, outdated)[:1]
	if err := s.remove(ctx, sc, next, "it runs an older machine template"); err != nil {
		return outcome.Outcome{}, err
	}
	return outcome.Wait(infrav1.RollingReason, msg+"; replacing "+names(next)), nil
}

// instances pairs the pool's VMs with their KubevirtMachines and Machines.
// Orphans are the Machines named after no VM of the pool.
func (s *Service) instances(ctx context.Context, sc *Scope, vms []kubevirtv1.VirtualMachine) ([]instance, []*clusterv1.Machine, error) {
	p := sc.Pool
	kms := &infrav1.KubevirtMachineList{}
	if err := s.Client.List(ctx, kms, client.InNamespace(p.Namespace), client.MatchingLabels{infrav1.KubevirtMachinePoolLabel: format.MustFormatValue(p.Name)}); err != nil {
		return nil, nil, fmt.Errorf("listing the KubevirtMachines of pool %s: %w", p.Name, err)
	}
	machines := &clusterv1.MachineList{}
	if err := s.Client.List(ctx, machines, client.InNamespace(p.Namespace), client.MatchingLabels{
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(sc.MachinePool.Name), clusterv1.ClusterNameLabel: sc.Cluster.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the Machines of MachinePool %s: %w", sc.MachinePool.Name, err)
	}
	kmByName := map[string]*infrav1.KubevirtMachine{}
	for i := range kms.Items {
		kmByName[kms.Items[i].Name] = &kms.Items[i]
	}
	machineByName := map[string]*clusterv1.Machine{}
	for i := range machines.Items {
		machineByName[machines.Items[i].Name] = &machines.Items[i]
	}
	out := make([]instance, 0, len(vms))
	for i := range vms {
		vm := &vms[i]
		out = append(out, instance{vm: vm, km: kmByName[vm.Name], machine: machineByName[vm.Name]})
		delete(machineByName, vm.Name)
	}
	orphans := slices.Collect(maps.Values(machineByName))
	return out, orphans, nil
}

// ensureMachine creates the KubevirtMachine of a live VM. Cluster API's
// MachinePool controller then makes its Machine, of the same name.
func (s *Service) ensureMachine(ctx context.Context, sc *Scope, i *instance) error {
	if i.km != nil {
		// One made for an earlier VM of that name is on its way out; the
		// event of its deletion brings the pool back.
		return nil
	}
	p := sc.Pool
	km := &infrav1.KubevirtMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name: i.vm.Name, Namespace: p.Namespace,
			Labels:      maps.Clone(p.Labels),
			Annotations: map[string]string{infrav1.PoolVMUIDAnnotation: string(i.vm.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "KubevirtMachinePool",
				Name: p.Name, UID: p.UID}},
		},
		Spec: *p.Spec.Template.Spec.DeepCopy(),
	}
	if km.Labels == nil {
		km.Labels = map[string]string{}
	}
	km.Labels[clusterv1.ClusterNameLabel] = sc.Cluster.Name
	km.Labels[clusterv1.MachinePoolNameLabel] = format.MustFormatValue(sc.MachinePool.Name)
	km.Labels[infrav1.KubevirtMachinePoolLabel] = format.MustFormatValue(p.Name)
	km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + i.vm.Name)
	if err := s.Client.Create(ctx, km); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier reconcile the cache has not seen yet.
			existing := &infrav1.KubevirtMachine{}
			if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(km), existing); err != nil {
				return client.IgnoreNotFound(err)
			}
			i.km = existing
			return nil
		}
		return fmt.Errorf("creating KubevirtMachine %s for VM %s: %w", km.Name, i.vm.Name, err)
	}
	i.km = km
	s.Recorder.Eventf(p, km, corev1.EventTypeNormal, "KubevirtMachineCreated", "CreateKubevirtMachine",
		"created KubevirtMachine %s for VirtualMachine %s/%s", km.Name, i.vm.Namespace, i.vm.Name)
	return nil
}

// poolVMFinalizer is KubeVirt's finalizer on the VMs of a
// VirtualMachinePool; with unmanaged scale-in, the pool never removes it
// (docs/kubevirt-behaviour.md#virtualmachinepools).
const poolVMFinalizer = poolv1.VirtualMachinePoolControllerFinalizer

// release removes the pool's finalizer from a VM being deleted once its
// instance has stopped and its KubevirtMachine and Machine are gone: until
// then the pool counts the VM and makes no replacement under its name, so
// that Cluster API deletes the old Node before a new guest of that name can
// join. Absence is confirmed with the API server, not the cache.
func (s *Service) release(ctx context.Context, sc *Scope, i instance) error {
	vm := i.vm
	if !slices.Contains(vm.Finalizers, poolVMFinalizer) || i.km != nil || i.machine != nil {
		return nil
	}
	for _, obj := range []client.Object{&infrav1.KubevirtMachine{}, &clusterv1.Machine{}} {
		err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Pool.Namespace, Name: vm.Name}, obj)
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %T %s: %w", obj, vm.Name, err)
		}
	}
	infra := sc.Access.Infra
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := infra.APIReader.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading VirtualMachineInstance %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	orig := vm.DeepCopy()
	vm.Finalizers = slices.DeleteFunc(slices.Clone(vm.Finalizers), func(f string) bool { return f == poolVMFinalizer })
	if err := infra.Client.Patch(ctx, vm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		if apierrors.IsConflict(err) {
			// The VM's next event brings the pool back.
			return nil
		}
		return fmt.Errorf("releasing VirtualMachine %s/%s from its pool: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

// remove takes instances out of the pool through their Machines, so that
// Cluster API drains their Nodes first; the KubevirtMachine's deletion then
// deletes the VM. An instance Cluster API has no Machine for yet has
// nothing to drain: its VM and KubevirtMachine go at once.
func (s *Service) remove(ctx context.Context, sc *Scope, victims []instance, why string) error {
	infra := sc.Access.Infra
	pool := client.ObjectKeyFromObject(sc.Pool)
	for _, i := range victims {
		m := i.machine
		if m == nil {
			// The cache may not have the Machine Cluster API just made:
			// one left without its KubevirtMachine would wait forever.
			found := &clusterv1.Machine{}
			err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Pool.Namespace, Name: i.vm.Name}, found)
			switch {
			case err == nil:
				m = found
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("reading Machine %s: %w", i.vm.Name, err)
			}
		}
		if m != nil {
			if err := s.deleteMachine(ctx, sc, m, why); err != nil {
				return err
			}
			continue
		}
		err := infra.Client.Delete(ctx, i.vm, client.Preconditions{UID: &i.vm.UID})
		if client.IgnoreNotFound(err) == nil && i.km != nil {
			err = s.Client.Delete(ctx, i.km, client.Preconditions{UID: &i.km.UID})
		}
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting VirtualMachine %s: %w", i.vm.Name, err)
		}
		s.pending.add(pool, i.vm.UID)
		s.Recorder.Eventf(sc.Pool, nil, corev1.EventTypeNormal, "RemovingInstance", "RemoveInstance", "deleting VirtualMachine %s: %s", i.vm.Name, why)
	}
	return nil
}

func names(instances []instance) string {
	out := make([]string, 0, len(instances))
	for _, i := range instances {
		out = append(out, i.vm.Name)
	}
	return strings.Join(out, ", ")
}

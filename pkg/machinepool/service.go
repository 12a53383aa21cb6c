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

// Package machinepool keeps the KubeVirt VirtualMachinePool of a
// KubevirtMachinePool: its VM template, its replicas and the bootstrap data
// its VMs share, and reports the pool's instances.
package machinepool

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/poolbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// TemplateHashAnnotation on a VirtualMachinePool is the hash of the pool the
// provider last wrote, so that an unchanged pool is not written again.
const TemplateHashAnnotation = "capkv.io/pool-hash"

// Scope is one KubevirtMachinePool with the objects around it.
type Scope struct {
	Pool *infrav1.KubevirtMachinePool
	// MachinePool and Cluster own the pool; nil while it has no owner.
	MachinePool *clusterv1.MachinePool
	Cluster     *clusterv1.Cluster
	// KubevirtCluster is nil when the Cluster's infrastructure is not one.
	KubevirtCluster *infrav1.KubevirtCluster
	// Access is the pool's infra cluster and whether it can be used.
	Access infracluster.Access
	// FinalizerStored is false in the reconcile that adds the finalizer:
	// nothing is created on the infra cluster then.
	FinalizerStored bool
}

// Key is the VirtualMachinePool on the infra cluster: the
// KubevirtMachinePool's name, in the template's namespace or else the infra
// cluster's.
func (sc *Scope) Key() types.NamespacedName {
	ns := sc.Pool.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Namespace
	if ns == "" {
		ns = sc.Access.Infra.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: sc.Pool.Name}
}

// Service keeps VirtualMachinePools.
type Service struct {
	// Client reads and writes the management cluster: bootstrap data
	// Secrets, the instances' KubevirtMachines and Machines.
	Client client.Client
	// APIReader reads the management cluster uncached, to confirm that an
	// instance's machines are gone.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// RecheckAfter is how soon a failure nothing announces the end of is
	// looked at again; 0 means 10s.
	RecheckAfter time.Duration

	memo memo
	// pending are the deletions the cache does not show yet.
	pending pendingDeletions
}

// Reconcile creates or updates the pool's VirtualMachinePool, keeps its
// instances and reports them in the KubevirtMachinePool's status and its
// VirtualMachinePoolReady condition, which only this service writes.
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	o, err := s.reconcile(ctx, sc)
	s.record(sc.Pool, o)
	return o, err
}

func (s *Service) reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	p := sc.Pool
	if sc.MachinePool == nil || sc.Cluster == nil {
		return outcome.Wait(infrav1.WaitingForMachinePoolReason,
			"waiting for a MachinePool to own this KubevirtMachinePool and for its Cluster to exist"), nil
	}
	if !sc.Access.Available() {
		o := sc.Access.Outcome
		return outcome.Outcome{State: o.State, Reason: o.Reason, RequeueAfter: o.RequeueAfter,
			Message: "cannot use the infra cluster: " + o.Message}, nil
	}
	s.reconcileCapacity(ctx, sc)
	key := sc.Key()
	pool, o, err := s.ensurePool(ctx, sc, key)
	if err != nil || pool == nil {
		return o, err
	}
	recordProvisioned(p, key)
	// The instances are kept even while the pool's template waits (a new
	// image importing, bootstrap data missing): released VMs, machines of
	// new VMs and scale-downs do not wait for it.
	vms := &kubevirtv1.VirtualMachineList{}
	if err := sc.Access.Infra.Client.List(ctx, vms, client.InNamespace(key.Namespace), client.MatchingLabels(poolbuilder.Selector(key.Name))); err != nil {
		return outcome.Outcome{}, fmt.Errorf("listing the VMs of VirtualMachinePool %s: %w", key, err)
	}
	owner := vmbuilder.OwnerOf(p.Namespace, p.Name)
	vms.Items = slices.DeleteFunc(vms.Items, func(vm kubevirtv1.VirtualMachine) bool { return vm.Annotations[infrav1.PoolOwnerAnnotation] != owner })
	counted := s.report(sc, key, vms.Items, ptr.Deref(sc.MachinePool.Spec.Replicas, 1))
	instances, err := s.syncInstances(ctx, sc, pool, vms.Items)
	switch {
	case err != nil:
		return outcome.Outcome{}, err
	case !o.IsDone():
		return o, nil
	case !instances.IsDone():
		return instances, nil
	}
	return counted, nil
}

// ensurePool creates or updates the VirtualMachinePool. It returns the
// pool as it stands (nil when there is none that is ours) and, when it
// stopped short, the outcome saying why.
func (s *Service) ensurePool(ctx context.Context, sc *Scope, key types.NamespacedName) (*poolv1.VirtualMachinePool, outcome.Outcome, error) {
	p := sc.Pool
	infra := sc.Access.Infra
	existing := &poolv1.VirtualMachinePool{}
	if err := infra.Client.Get(ctx, key, existing); apierrors.IsNotFound(err) {
		existing = nil
	} else if meta.IsNoMatchError(err) {
		return nil, outcome.Fail(infrav1.VirtualMachinePoolsNotServedReason,
			"the infra cluster's KubeVirt does not serve VirtualMachinePools (pool.kubevirt.io/v1beta1), which MachinePools need").After(s.recheck()), nil
	} else if err != nil {
		return nil, outcome.Outcome{}, fmt.Errorf("reading VirtualMachinePool %s: %w", key, err)
	}
	if existing != nil && existing.Annotations[infrav1.PoolOwnerAnnotation] != vmbuilder.OwnerOf(p.Namespace, p.Name) {
		return nil, outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"VirtualMachinePool %s exists but was not created for this KubevirtMachinePool; rename or remove it", key)), nil
	}
	if existing == nil && !sc.FinalizerStored {
		return nil, outcome.Wait(infrav1.PendingReason, "the VirtualMachinePool is created once the pool's finalizer is stored"), nil
	}
	if refused, err := s.guestAllowed(ctx, sc, key.Namespace); err != nil || refused.Reason != "" {
		return existing, refused, err
	}
	goldenVolume, wait, err := s.goldenVolume(ctx, sc, key.Namespace)
	if err != nil || !wait.IsDone() {
		return existing, wait, err
	}
	data, wait, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return existing, wait, err
	}
	in := s.input(sc, key, data)
	in.VM.GoldenVolume = goldenVolume
	want, err := poolbuilder.Build(in)
	if err != nil {
		return existing, outcome.Fail(infrav1.PoolCreateFailedReason, err.Error()), nil
	}
	hash, err := hashOf(want)
	if err != nil {
		return existing, outcome.Outcome{}, err
	}
	want.Annotations[TemplateHashAnnotation] = hash
	if existing == nil {
		// A Secret of that name that is not ours would be mounted by the
		// pool's first VMs: refuse before creating anything.
		if o, err := s.userDataConflict(ctx, sc, key); err != nil || !o.IsDone() {
			return nil, o, err
		}
		if o, err := s.create(ctx, sc, want); err != nil || !o.IsDone() {
			return nil, o, err
		}
		// New bootstrap data reaches the Secret before new VMs read it.
		o, err := s.ensureUserDataSecret(ctx, sc, data, want)
		return want, o, err
	}
	// New bootstrap data reaches the Secret before a scale-up or new
	// template makes VMs that read it.
	if o, err := s.ensureUserDataSecret(ctx, sc, data, existing); err != nil || !o.IsDone() {
		return existing, o, err
	}
	if existing.Annotations[TemplateHashAnnotation] != hash {
		updated := existing.DeepCopy()
		updated.Spec = want.Spec
		// Labels and annotations others add stay.
		updated.Labels = poolbuilder.MergedInto(updated.Labels, want.Labels)
		updated.Annotations = poolbuilder.MergedInto(updated.Annotations, want.Annotations)
		if err := infra.Client.Update(ctx, updated); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				return existing, outcome.Fail(infrav1.PoolCreateFailedReason, "the infra cluster refused the VirtualMachinePool update: "+err.Error()).After(s.recheck()), nil
			}
			return existing, outcome.Outcome{}, fmt.Errorf("updating VirtualMachinePool %s: %w", key, err)
		}
		existing = updated
	}
	return existing, outcome.Ready("", ""), nil
}

// goldenVolume makes sure the golden volume the pool's root disks clone
// exists, and returns it once imported. The pool first names it in its
// status, saved before the volume is touched, so that the golden image
// controller counts the pool as a user: each VM the pool makes later clones
// the volume, so the pool keeps it as long as it has the root disk.
func (s *Service) goldenVolume(ctx context.Context, sc *Scope, ns string) (*types.NamespacedName, outcome.Outcome, error) {
	p := sc.Pool
	rd := p.Spec.Template.Spec.RootDisk
	if !goldenplan.Needed(rd) {
		p.Status.GoldenImage = nil
		return nil, outcome.Ready("", ""), nil
	}
	if wait, changed := goldenkeeper.Use(&p.Status.GoldenImage, sc.Access.Infra.Secret, ns, rd); changed {
		return nil, wait, nil
	}
	key, o, err := goldenkeeper.Ensure(ctx, sc.Access.Infra.Client, s.Recorder, p, rd, ns, s.recheck())
	if err != nil || key == nil {
		return nil, o, err
	}
	return key, outcome.Ready("", ""), nil
}

// recheck is when to look again at what no event announces.
func (s *Service) recheck() time.Duration { return outcome.Recheck(s.RecheckAfter) }

func (s *Service) create(ctx context.Context, sc *Scope, want *poolv1.VirtualMachinePool) (outcome.Outcome, error) {
	key := client.ObjectKeyFromObject(want)
	if err := sc.Access.Infra.Client.Create(ctx, want); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Ours, created by an earlier reconcile the cache has not seen
			// yet: its watch event follows.
			return outcome.Wait(infrav1.PendingReason, fmt.Sprintf("VirtualMachinePool %s exists, waiting for it", key)).After(s.recheck()), nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			// Nothing announces a change of the infra API's mind.
			return outcome.Fail(infrav1.PoolCreateFailedReason, "the infra cluster refused the VirtualMachinePool: "+err.Error()).After(s.recheck()), nil
		}
		return outcome.Outcome{}, fmt.Errorf("creating VirtualMachinePool %s: %w", key, err)
	}
	s.Recorder.Eventf(sc.Pool, want, corev1.EventTypeNormal, "VirtualMachinePoolCreated", "CreateVirtualMachinePool",
		"created VirtualMachinePool %s with %d replicas on the %s", key, *want.Spec.Replicas, sc.Access.Infra.Description())
	return outcome.Ready("", ""), nil
}

// input is what the pool's VMs are built from: the pool's machine template
// with the cluster's networks, DNS and failure domain rules.
func (s *Service) input(sc *Scope, key types.NamespacedName, data *bootstrapData) poolbuilder.Input {
	p := sc.Pool
	in := vmbuilder.Input{
		Name: key.Name, Namespace: key.Namespace, Spec: p.Spec.Template.Spec, KubevirtMachineNamespace: p.Namespace,
		ClusterName: sc.Cluster.Name, MachinePool: sc.MachinePool.Name,
		UserDataSecret: key.Name + infrav1.UserDataSecretSuffix, Format: data.Format, HasNetworkData: data.NetworkData != nil,
	}
	if fds := sc.MachinePool.Spec.FailureDomains; len(fds) == 1 {
		// A pool spread over several failure domains is placed by the
		// default topology spread; one failure domain pins it.
		in.FailureDomain = fds[0]
	}
	if kc := sc.KubevirtCluster; kc != nil {
		in.FailureDomainSelector = failuredomains.Selector(kc.Spec.FailureDomains, in.FailureDomain)
		in.ClusterNetworks = tenantnet.ClusterNetworks(kc, sc.Access.Infra.Namespace)
		in.DNSPolicy, in.DNSConfig = kc.Spec.DNSPolicy, kc.Spec.DNSConfig
	}
	if !sc.Access.Infra.External && key.Namespace == p.Namespace {
		in.Owner = metav1.NewControllerRef(p, infrav1.GroupVersion.WithKind("KubevirtMachinePool"))
	}
	return poolbuilder.Input{VM: in, Replicas: ptr.Deref(sc.MachinePool.Spec.Replicas, 1)}
}

// report counts the pool's VMs and lists their providerIDs, and says
// whether they are all there and ready.
func (s *Service) report(sc *Scope, key types.NamespacedName, vms []kubevirtv1.VirtualMachine, desired int32) outcome.Outcome {
	var ids []string
	var ready int32
	for i := range vms {
		vm := &vms[i]
		if !vm.DeletionTimestamp.IsZero() {
			continue
		}
		ids = append(ids, infrav1.ProviderIDPrefix+vm.Name)
		if vm.Status.Ready {
			ready++
		}
	}
	slices.Sort(ids)
	recordInstances(sc.Pool, ids, ready)
	msg := fmt.Sprintf("%d of %d VMs exist, %d ready, in VirtualMachinePool %s", len(ids), desired, ready, key)
	if int32(len(ids)) != desired || ready != desired {
		// The pool's status changes with its VMs: its watch brings the
		// next step.
		return outcome.Wait(infrav1.ScalingReason, msg)
	}
	return outcome.Ready(infrav1.ReadyReason, msg)
}

// hashOf hashes what the provider writes of a pool.
func hashOf(p *poolv1.VirtualMachinePool) (string, error) {
	return poolbuilder.Hash(p.Labels, p.Annotations, p.Spec)
}

// guestAllowed checks the pool's VM template against the multi-tenancy
// policy before anything of the pool is created or updated, as admission
// did: a webhook can be off, and the identity can have changed since.
func (s *Service) guestAllowed(ctx context.Context, sc *Scope, vmNamespace string) (outcome.Outcome, error) {
	refusal, err := tenancy.CheckVM(ctx, sc.Access.Infra.APIReader, tenancy.VM{
		Spec: &sc.Pool.Spec.Template.Spec, ClusterNetworks: tenancy.NetworksOf(sc.KubevirtCluster), Allow: sc.Access.Infra.Guest,
		Namespace: vmNamespace, TenantNamespace: sc.Pool.Namespace, ClusterName: sc.Cluster.Name,
		Shared: tenancy.Shared(vmNamespace, sc.Pool.Namespace, sc.Access.Infra.External, sc.Access.Infra.Secret.Namespace),
		Path:   field.NewPath("spec", "template", "spec"),
	})
	return tenancy.Outcome(refusal, err, s.recheck())
}

// reconcileCapacity reports what one instance offers, for the cluster
// autoscaler to scale the MachinePool up from zero, reading the instance
// type and preference the template names from the infra cluster's cache.
// The pool does not watch them: one created later counts at the pool's
// next reconcile. One that cannot be read leaves CapacityKnown False, and
// the pool goes on: its instances need no capacity.
func (s *Service) reconcileCapacity(ctx context.Context, sc *Scope) {
	vmSpec := &sc.Pool.Spec.Template.Spec.VirtualMachineTemplate.Spec
	var src capacity.Sources
	if capacity.SelectsSources(vmSpec) {
		infra := sc.Access.Infra
		var err error
		if src, err = capacity.ReadSources(ctx, infra.Client, infra.Namespace, vmSpec); err != nil {
			recordCapacity(sc.Pool, capacity.Result{Reason: infrav1.InstancetypeUnavailableReason, Message: err.Error()})
			return
		}
	}
	recordCapacity(sc.Pool, capacity.FromVirtualMachine(vmSpec, src))
}

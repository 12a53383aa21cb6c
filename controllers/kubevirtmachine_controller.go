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
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/statuspacing"
)

// KubevirtMachineReconciler reconciles KubevirtMachines.
type KubevirtMachineReconciler struct {
	Client   client.Client
	Clients  *infracluster.Clients
	Recorder events.EventRecorder
	// ClusterCache reaches tenant clusters, to watch their Nodes.
	ClusterCache clustercache.ClusterCache
	// Machines does the work once the objects are fetched.
	Machines *machine.Service
	// StatusPacing decides when a machine's status is written and times
	// its stages; the machine service shares it.
	StatusPacing *statuspacing.Keeper
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string

	controller capicontroller.Controller
	// written holds the status this process last wrote for each machine
	// (writtenStatus); this controller is its status's only writer.
	written sync.Map
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets,verbs=get
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;create;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=kubevirts,verbs=list
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=inclusterippools;globalinclusterippools,verbs=get

// Reconcile brings one KubevirtMachine towards its desired state.
func (r *KubevirtMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, rerr error) {
	km := &infrav1.KubevirtMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, km); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(machineUser(req.NamespacedName))
			r.StatusPacing.Forget(req.NamespacedName)
			r.written.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if filteredOut(km, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}

	machineOwner, err := util.GetOwnerMachine(ctx, r.Client, km.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("getting owner Machine: %w", err)
	}
	var cluster *clusterv1.Cluster
	switch {
	case machineOwner != nil:
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machineOwner.ObjectMeta)
	case !km.DeletionTimestamp.IsZero() && km.Labels[clusterv1.ClusterNameLabel] != "":
		// The Machine went first (removed by force, or never finalized):
		// the Cluster label still leads to the infra cluster, so that the
		// VM does not outlive its KubevirtMachine.
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, km.ObjectMeta)
	default:
		err = nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("getting Cluster of KubevirtMachine %s: %w", km.Name, err)
	}
	if cluster != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(machineOwner), "Cluster", klog.KObj(cluster)))
		if annotations.IsPaused(cluster, km) {
			r.written.Delete(req.NamespacedName)
			_, _, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, km)
			return ctrl.Result{}, err
		}
	}

	stored := km.DeepCopy()
	var o outcome.Outcome
	defer func() {
		machine.Summarize(km)
		r.StatusPacing.Track(stored, km, o, time.Now())
		requeue, err := r.writeBack(ctx, stored, km, o)
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachine: %w", err)
		}
		result.RequeueAfter = outcome.Sooner(result.RequeueAfter, requeue)
	}()
	if cluster != nil {
		machine.MarkNotPaused(km)
	}
	finalizerStored := controllerutil.ContainsFinalizer(km, infrav1.MachineFinalizer)
	if km.DeletionTimestamp.IsZero() && cluster != nil && !finalizerStored {
		// The service creates no VM before the finalizer is stored, so
		// nothing can outlive the machine, but it reports what the machine
		// waits for in the same writes. The providerID is known already
		// (the VM's name); Cluster API reads it only once the machine is
		// provisioned.
		controllerutil.AddFinalizer(km, infrav1.MachineFinalizer)
		if km.Spec.ProviderID == nil {
			km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + km.Name)
		}
	}
	if !km.DeletionTimestamp.IsZero() && !finalizerStored {
		return ctrl.Result{}, nil
	}
	scope, err := r.scope(ctx, km, machineOwner, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	scope.FinalizerStored = finalizerStored
	if !km.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, scope)
	}
	if cluster != nil {
		if err := r.watchNodes(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	o, err = r.Machines.Reconcile(ctx, scope)
	return o.Result(), err
}

// scope gathers the objects around the machine: its KubevirtCluster and its
// infra cluster, whose InfraClusterAvailable condition it sets. Without an
// owner yet there is no infra cluster to look at.
func (r *KubevirtMachineReconciler) scope(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine, cluster *clusterv1.Cluster) (*machine.Scope, error) {
	sc := &machine.Scope{KubevirtMachine: km, Machine: m, Cluster: cluster}
	if cluster == nil && km.DeletionTimestamp.IsZero() {
		return sc, nil
	}
	if cluster != nil {
		kc, err := kubevirtClusterOf(ctx, r.Client, cluster)
		if err != nil {
			return nil, err
		}
		sc.KubevirtCluster = kc
	}
	spec := field.NewPath("spec")
	sc.SetAccess(r.Clients.Open(ctx, tenancy.MachineSource(&km.Spec, sc.KubevirtCluster, spec), km.Namespace,
		tenancy.MachineRequest(&km.Spec, spec), machineUser(client.ObjectKeyFromObject(km))))
	machine.RecordInfraAccess(r.Recorder, km, sc.Access)
	return sc, nil
}

// reconcileDelete has the service remove the machine's infra objects, then
// removes the finalizer.
func (r *KubevirtMachineReconciler) reconcileDelete(ctx context.Context, sc *machine.Scope) (ctrl.Result, error) {
	km := sc.KubevirtMachine
	o, err := r.Machines.Delete(ctx, sc)
	if err != nil || !o.IsDone() {
		return o.Result(), err
	}
	r.Clients.Release(machineUser(client.ObjectKeyFromObject(km)))
	r.written.Delete(client.ObjectKeyFromObject(km))
	controllerutil.RemoveFinalizer(km, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

func machineUser(key types.NamespacedName) infracluster.User {
	return infracluster.User{Kind: "KubevirtMachine", NamespacedName: key}
}

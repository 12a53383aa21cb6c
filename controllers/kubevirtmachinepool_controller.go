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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machinepool"
)

// MachinePoolFinalizer keeps a KubevirtMachinePool until its
// VirtualMachinePool and VMs are gone.
const MachinePoolFinalizer = "kubevirtmachinepool.infrastructure.cluster.x-k8s.io"

// KubevirtMachinePoolReconciler keeps the VirtualMachinePool of each
// KubevirtMachinePool; the logic is in pkg/machinepool.
type KubevirtMachinePoolReconciler struct {
	Client           client.Client
	Clients          *infracluster.Clients
	Recorder         events.EventRecorder
	Pools            *machinepool.Service
	WatchFilterValue string

	controller capicontroller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools;machinepools/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=pool.kubevirt.io,resources=virtualmachinepools,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;patch;delete

// Reconcile fetches the pool and its owners, honours pause, keeps the
// finalizer and the status patch, and hands the rest to the pool service.
func (r *KubevirtMachinePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, rerr error) {
	p := &infrav1.KubevirtMachinePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(poolUser(req.NamespacedName))
			r.Pools.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if filteredOut(p, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}
	mp, err := util.GetOwnerMachinePool(ctx, r.Client, p.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("getting owner MachinePool: %w", err)
	}
	var cluster *clusterv1.Cluster
	if mp != nil {
		cluster, err = util.GetClusterByName(ctx, r.Client, mp.Namespace, mp.Spec.ClusterName)
	} else if p.Labels[clusterv1.ClusterNameLabel] != "" {
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, p.ObjectMeta)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("getting Cluster of KubevirtMachinePool %s: %w", p.Name, err)
	}
	if cluster != nil && annotations.IsPaused(cluster, p) {
		_, _, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, p)
		return ctrl.Result{}, err
	}

	stored := p.DeepCopy()
	var o outcome.Outcome
	defer func() {
		if cluster != nil {
			machinepool.MarkNotPaused(p)
		}
		machinepool.Summarize(p)
		if err := patchOnce(ctx, r.Client, stored, p, true); err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachinePool: %w", err)
		}
	}()
	finalizerStored := controllerutil.ContainsFinalizer(p, MachinePoolFinalizer)
	if p.DeletionTimestamp.IsZero() && mp != nil && !finalizerStored {
		controllerutil.AddFinalizer(p, MachinePoolFinalizer)
	}
	if !p.DeletionTimestamp.IsZero() && !finalizerStored {
		return ctrl.Result{}, nil
	}
	sc := &machinepool.Scope{Pool: p, MachinePool: mp, Cluster: cluster, FinalizerStored: finalizerStored}
	if cluster != nil {
		if sc.KubevirtCluster, err = kubevirtClusterOf(ctx, r.Client, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	if cluster != nil || !p.DeletionTimestamp.IsZero() {
		spec := field.NewPath("spec", "template", "spec")
		sc.Access = r.Clients.Open(ctx, tenancy.MachineSource(&p.Spec.Template.Spec, sc.KubevirtCluster, spec), p.Namespace,
			tenancy.MachineRequest(&p.Spec.Template.Spec, spec), poolUser(req.NamespacedName))
		machinepool.RecordInfraAccess(r.Recorder, p, sc.Access)
	}
	if !p.DeletionTimestamp.IsZero() {
		if o, err = r.Pools.Delete(ctx, sc); err != nil || !o.IsDone() {
			return o.Result(), err
		}
		r.Clients.Release(poolUser(req.NamespacedName))
		controllerutil.RemoveFinalizer(p, MachinePoolFinalizer)
		return ctrl.Result{}, nil
	}
	o, err = r.Pools.Reconcile(ctx, sc)
	return o.Result(), err
}

func poolUser(key types.NamespacedName) infracluster.User {
	return infracluster.User{Kind: "KubevirtMachinePool", NamespacedName: key}
}

// SetupWithManager registers the controller, and through Clients a watch of
// the VirtualMachinePools of every infra cluster in use.
func (r *KubevirtMachinePoolReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtmachinepool")
	filter := predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)
	c, err := capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtMachinePool{}, builder.WithPredicates(filter)).
		WithOptions(options).
		Watches(&clusterv1.MachinePool{},
			handler.EnqueueRequestsFromMapFunc(util.MachinePoolToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("KubevirtMachinePool"))),
			filter).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(r.clusterToPools),
			predicates.ClusterPausedTransitions(mgr.GetScheme(), log), filter).
		Watches(&infrav1.KubevirtCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPools), filter).
		// An instance's machines: their deletion lets its VM go, their
		// provisioning lets a roll go on, the delete-machine annotation
		// orders a scale-down.
		Watches(&infrav1.KubevirtMachine{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &infrav1.KubevirtMachinePool{})).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToPool)).
		WatchesMetadata(SecretMetadata(), handler.EnqueueRequestsFromMapFunc(r.bootstrapDataToPools)).
		WatchesMetadata(crdMetadata(),
			handler.EnqueueRequestsFromMapFunc(recheckAll(r.Clients, mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtMachinePoolList{} })),
			kubevirtCRDChanged).
		// An administrator's grant, or its withdrawal, is acted on at once.
		WatchesMetadata(identityMetadata(),
			handler.EnqueueRequestsFromMapFunc(enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtMachinePoolList{} }))).
		Build(ctx, r)
	if err != nil {
		return err
	}
	r.controller = c
	r.Clients.AddWatches(func(infra *infracluster.Infra) error {
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&cdiv1.DataVolume{}), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, dv client.Object) []reconcile.Request {
				return r.goldenToPools(ctx, infra.Secret, dv)
			}), isGolden)); err != nil {
			return err
		}
		// The pool's VMs: their readiness, and their deletion after the
		// pool's, come as VM events.
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(poolOwnerToRequest))); err != nil {
			return err
		}
		gvk := poolv1.SchemeGroupVersion.WithKind("VirtualMachinePool")
		if _, err := infra.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			// A watch on a kind the cluster does not serve would never sync;
			// the pools there say so in their condition.
			return ignoreNoMatch(err)
		}
		return r.controller.Watch(source.Kind(infra.Cache, client.Object(&poolv1.VirtualMachinePool{}), handler.EnqueueRequestsFromMapFunc(poolOwnerToRequest)))
	})
	return nil
}

// bootstrapDataToPools maps a bootstrap data Secret to the pools of the
// MachinePools that name it.
func (r *KubevirtMachinePoolReconciler) bootstrapDataToPools(ctx context.Context, secret client.Object) []reconcile.Request {
	mps := &clusterv1.MachinePoolList{}
	if err := r.Client.List(ctx, mps, client.InNamespace(secret.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, mp := range mps.Items {
		ref := mp.Spec.Template.Spec.InfrastructureRef
		if ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "") == secret.GetName() && ref.Kind == "KubevirtMachinePool" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: ref.Name}})
		}
	}
	return reqs
}

// machineToPool maps a MachinePool Machine to its MachinePool's
// KubevirtMachinePool.
func (r *KubevirtMachinePoolReconciler) machineToPool(ctx context.Context, obj client.Object) []reconcile.Request {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.Kind != "MachinePool" {
		return nil
	}
	mp := &clusterv1.MachinePool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner.Name}, mp); err != nil {
		return nil
	}
	if ref := mp.Spec.Template.Spec.InfrastructureRef; ref.Kind == "KubevirtMachinePool" && ref.Name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: ref.Name}}}
	}
	return nil
}

func ignoreNoMatch(err error) error {
	if meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// clusterToPools maps a Cluster, or a KubevirtCluster, to the
// KubevirtMachinePools of the cluster of that name.
func (r *KubevirtMachinePoolReconciler) clusterToPools(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetName()
	if _, ok := obj.(*infrav1.KubevirtCluster); ok {
		if name = obj.GetLabels()[clusterv1.ClusterNameLabel]; name == "" {
			return nil
		}
	}
	return listRequests(ctx, r.Client, &infrav1.KubevirtMachinePoolList{},
		client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name})
}

// goldenToPools maps a golden volume to the pools that clone it.
func (r *KubevirtMachinePoolReconciler) goldenToPools(ctx context.Context, infraSecret types.NamespacedName, dv client.Object) []reconcile.Request {
	return listRequests(ctx, r.Client, &infrav1.KubevirtMachinePoolList{},
		client.MatchingFields{GoldenImageIndex: goldenIndexValue(infraSecret, dv.GetNamespace(), dv.GetName())})
}

// poolOwnerToRequest maps a VirtualMachinePool to its KubevirtMachinePool by
// the pool owner annotation.
func poolOwnerToRequest(_ context.Context, obj client.Object) []reconcile.Request {
	return annotatedOwner(obj, infrav1.PoolOwnerAnnotation)
}

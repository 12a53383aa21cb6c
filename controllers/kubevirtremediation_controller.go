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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/remediation"
)

// KubevirtRemediationReconciler reconciles KubevirtRemediations, the
// external remediation requests MachineHealthChecks create from a
// KubevirtRemediationTemplate.
type KubevirtRemediationReconciler struct {
	Client client.Client
	// APIReader reads the remediation past the cache, so that a status
	// not yet in the cache never causes a second restart.
	APIReader client.Reader
	// Remediations does the work once the objects are fetched.
	Remediations *remediation.Service
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediations;kubevirtremediationtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile takes the next step of one remediation.
func (r *KubevirtRemediationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	rem := &infrav1.KubevirtRemediation{}
	if err := r.Client.Get(ctx, req.NamespacedName, rem); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Machine and KubevirtMachine events reach here for every Machine;
	// only a remediation that exists is read again, from the API server.
	if err := r.APIReader.Get(ctx, req.NamespacedName, rem); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if filteredOut(rem, r.WatchFilterValue) || !rem.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	m, err := r.machineOf(ctx, rem)
	if err != nil {
		return ctrl.Result{}, err
	}
	clusterName := rem.Labels[clusterv1.ClusterNameLabel]
	if m != nil {
		clusterName = m.Spec.ClusterName
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m)))
	}
	if clusterName != "" {
		cluster, err := util.GetClusterByName(ctx, r.Client, rem.Namespace, clusterName)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting Cluster %s: %w", clusterName, err)
		}
		if cluster != nil {
			if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, rem); err != nil || isPaused || requeue {
				return ctrl.Result{}, err
			}
		}
	}
	if m != nil && !m.DeletionTimestamp.IsZero() {
		// Its owner is replacing it already.
		return ctrl.Result{}, nil
	}

	helper, err := patch.NewHelper(rem, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, rem, patch.WithOwnedConditions{Conditions: []string{infrav1.RemediatingCondition}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtRemediation: %w", err)
		}
	}()

	sc := &remediation.Scope{Remediation: rem, Machine: m}
	if m != nil {
		if sc.KubevirtMachine, err = r.kubevirtMachineOf(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	o, err := r.Remediations.Reconcile(ctx, sc)
	return o.Result(), err
}

// machineOf is the Machine the remediation is for: its owner, else the
// Machine of the same name (the MachineHealthCheck names it after the
// Machine); nil when there is none.
func (r *KubevirtRemediationReconciler) machineOf(ctx context.Context, rem *infrav1.KubevirtRemediation) (*clusterv1.Machine, error) {
	name := rem.Name
	for _, ref := range rem.OwnerReferences {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && ref.Kind == "Machine" && gv.Group == clusterv1.GroupVersion.Group {
			name = ref.Name
		}
	}
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rem.Namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting Machine %s: %w", name, err)
	}
	return m, nil
}

// kubevirtMachineOf is the Machine's KubevirtMachine; nil when its
// infrastructure is something else or does not exist.
func (r *KubevirtRemediationReconciler) kubevirtMachineOf(ctx context.Context, m *clusterv1.Machine) (*infrav1.KubevirtMachine, error) {
	ref := m.Spec.InfrastructureRef
	if ref.Kind != "KubevirtMachine" || ref.APIGroup != infrav1.GroupVersion.Group || ref.Name == "" {
		return nil, nil
	}
	km := &infrav1.KubevirtMachine{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}, km); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting KubevirtMachine %s: %w", ref.Name, err)
	}
	return km, nil
}

// SetupWithManager registers the controller. Besides its own objects it
// watches Machines and KubevirtMachines, mapped by name to the remediation
// of their Machine, so that one waiting for them moves on when they appear.
// Timeouts are requeues.
func (r *KubevirtRemediationReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtremediation")
	filter := predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)
	_, err := capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtRemediation{}, builder.WithPredicates(filter)).
		WithOptions(options).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToRemediation), filter).
		Watches(&infrav1.KubevirtMachine{}, handler.EnqueueRequestsFromMapFunc(kubevirtMachineToRemediation), filter).
		Build(ctx, r)
	return err
}

// machineToRemediation maps a Machine to the remediation of the same name.
func machineToRemediation(_ context.Context, m client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(m)}}
}

// kubevirtMachineToRemediation maps a KubevirtMachine to the remediation
// of its owner Machine.
func kubevirtMachineToRemediation(_ context.Context, km client.Object) []reconcile.Request {
	for _, ref := range km.GetOwnerReferences() {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && ref.Kind == "Machine" && gv.Group == clusterv1.GroupVersion.Group {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: km.GetNamespace(), Name: ref.Name}}}
		}
	}
	return nil
}

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
)

// KubevirtMachineTemplateReconciler keeps status.capacity and status.nodeInfo
// of KubevirtMachineTemplates, for cluster autoscaling from zero.
type KubevirtMachineTemplateReconciler struct {
	Client  client.Client
	Clients *infracluster.Clients
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string

	controller capicontroller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineinstancetypes;virtualmachineclusterinstancetypes;virtualmachinepreferences;virtualmachineclusterpreferences,verbs=get;list;watch

// Reconcile computes the capacity of one KubevirtMachineTemplate. Instance
// types and preferences are read from the infra cluster's cache and watched, so a template
// that names one not created yet is completed when it appears.
func (r *KubevirtMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	t := &infrav1.KubevirtMachineTemplate{}
	user := infracluster.User{Kind: "KubevirtMachineTemplate", NamespacedName: req.NamespacedName}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(user)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() || filteredOut(t, r.WatchFilterValue) {
		r.Clients.Release(user)
		return ctrl.Result{}, nil
	}
	stored := t.DeepCopy()
	defer func() {
		if err := patchOnce(ctx, r.Client, stored, t, true); err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachineTemplate: %w", err)
		}
	}()

	spec := &t.Spec.Template.Spec
	vmSpec := &spec.VirtualMachineTemplate.Spec
	keepsGolden := goldenplan.Needed(spec.RootDisk) && !goldenplan.ClassBlueprint(t.OwnerReferences)
	if !keepsGolden {
		t.Status.GoldenImage = nil
	}
	var src capacity.Sources
	if keepsGolden || capacity.SelectsSources(vmSpec) {
		infraSrc, err := r.infraSource(ctx, t)
		if err != nil {
			return ctrl.Result{}, err
		}
		access := r.Clients.Open(ctx, infraSrc, t.Namespace, tenancy.MachineRequest(spec, field.NewPath("spec", "template", "spec")), user)
		if keepsGolden && access.Infra != nil {
			// The template keeps its golden volume in use, so scaling a
			// MachineDeployment up again does not download the image again.
			// An infra cluster that cannot be resolved now keeps the last
			// one: the volume is still there.
			t.Status.GoldenImage = goldenplan.StatusOf(access.Infra.Secret, access.Infra.Namespace, spec.RootDisk)
		}
		if capacity.SelectsSources(vmSpec) {
			if !access.Available() {
				setCapacity(t, outcome.Fail(infrav1.InstancetypeUnavailableReason,
					"cannot read the instance type or preference: "+access.Outcome.Message))
				return access.Outcome.Result(), nil
			}
			if src, err = capacity.ReadSources(ctx, access.Infra.Client, access.Infra.Namespace, vmSpec); err != nil {
				setCapacity(t, outcome.Fail(infrav1.InstancetypeUnavailableReason, err.Error()))
				return ctrl.Result{}, err
			}
		}
	} else {
		r.Clients.Release(user)
	}
	res := capacity.FromVirtualMachine(vmSpec, src)
	t.Status.Capacity = res.Capacity
	t.Status.NodeInfo = res.NodeInfo
	if res.Known() {
		setCapacity(t, outcome.Ready(res.Reason, res.Message))
	} else {
		setCapacity(t, outcome.Fail(res.Reason, res.Message))
	}
	return ctrl.Result{}, nil
}

func setCapacity(t *infrav1.KubevirtMachineTemplate, o outcome.Outcome) {
	outcome.Set(t, infrav1.CapacityKnownCondition, o)
}

// infraSource is the template's own infra cluster reference, else the
// one of the KubevirtCluster of the Cluster the template belongs to (by its
// cluster-name label or owner reference), as its machines will use.
func (r *KubevirtMachineTemplateReconciler) infraSource(ctx context.Context, t *infrav1.KubevirtMachineTemplate) (tenancy.Source, error) {
	spec := &t.Spec.Template.Spec
	path := field.NewPath("spec", "template", "spec")
	if spec.InfraClusterSecretRef != nil || spec.IdentityRef != nil {
		return tenancy.MachineSource(spec, nil, path), nil
	}
	name := t.Labels[clusterv1.ClusterNameLabel]
	for _, o := range t.OwnerReferences {
		if o.Kind == "Cluster" && name == "" {
			name = o.Name
		}
	}
	if name == "" {
		return tenancy.Source{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, cluster); err != nil {
		return tenancy.Source{}, client.IgnoreNotFound(err)
	}
	kc, err := kubevirtClusterOf(ctx, r.Client, cluster)
	if err != nil {
		return tenancy.Source{}, err
	}
	return tenancy.MachineSource(spec, kc, path), nil
}

// SetupWithManager registers the controller, and through Clients a watch of
// the instance types of every infra cluster in use.
func (r *KubevirtMachineTemplateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtmachinetemplate")
	c, err := capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtMachineTemplate{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue))).
		WithOptions(options).
		WatchesMetadata(crdMetadata(),
			handler.EnqueueRequestsFromMapFunc(recheckAll(r.Clients, mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtMachineTemplateList{} })),
			kubevirtCRDChanged).
		Build(ctx, r)
	if err != nil {
		return err
	}
	r.controller = c
	r.Clients.AddWatches(func(infra *infracluster.Infra) error {
		for _, obj := range []client.Object{
			&instancetypev1beta1.VirtualMachineInstancetype{}, &instancetypev1beta1.VirtualMachineClusterInstancetype{},
			&instancetypev1beta1.VirtualMachinePreference{}, &instancetypev1beta1.VirtualMachineClusterPreference{},
		} {
			if err := r.controller.Watch(source.Kind(infra.Cache, obj, handler.EnqueueRequestsFromMapFunc(r.instancetypeToTemplates))); err != nil {
				return err
			}
		}
		return nil
	})
	return nil
}

// instancetypeToTemplates maps an instance type or preference to the
// templates naming it.
func (r *KubevirtMachineTemplateReconciler) instancetypeToTemplates(ctx context.Context, obj client.Object) []reconcile.Request {
	isPreference := false
	switch obj.(type) {
	case *instancetypev1beta1.VirtualMachinePreference, *instancetypev1beta1.VirtualMachineClusterPreference:
		isPreference = true
	}
	return listRequestsIf(ctx, r.Client, &infrav1.KubevirtMachineTemplateList{}, func(o client.Object) bool {
		spec := &o.(*infrav1.KubevirtMachineTemplate).Spec.Template.Spec.VirtualMachineTemplate.Spec
		name, kind := "", ""
		switch {
		case isPreference && spec.Preference != nil:
			name, kind = spec.Preference.Name, spec.Preference.Kind
		case !isPreference && spec.Instancetype != nil:
			name, kind = spec.Instancetype.Name, spec.Instancetype.Kind
		}
		return name != "" && name == obj.GetName() && capacity.Namespaced(kind) == (obj.GetNamespace() != "")
	})
}

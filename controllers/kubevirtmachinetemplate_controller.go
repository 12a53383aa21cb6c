package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/capacity"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
)

// KubevirtMachineTemplateReconciler keeps status.capacity and status.nodeInfo
// of KubevirtMachineTemplates, for cluster autoscaling from zero.
type KubevirtMachineTemplateReconciler struct {
	Client  client.Client
	Checker *infracluster.Checker
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineinstancetypes;virtualmachineclusterinstancetypes,verbs=get

// Reconcile computes the capacity of one KubevirtMachineTemplate. Instance
// types are read when the template changes; KubeVirt treats them as
// immutable in practice, since VMs keep a revision of the one they started
// with.
func (r *KubevirtMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	t := &infrav1.KubevirtMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	helper, err := patch.NewHelper(t, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, t, patch.WithOwnedConditions{Conditions: []string{infrav1.CapacityKnownCondition}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachineTemplate: %w", err)
		}
	}()

	spec := &t.Spec.Template.Spec
	var it *instancetypev1beta1.VirtualMachineInstancetypeSpec
	if m := spec.VirtualMachineTemplate.Spec.Instancetype; m != nil {
		it, err = r.instancetype(ctx, spec, t.Namespace, m)
		if err != nil {
			conditions.Set(t, metav1.Condition{
				Type: infrav1.CapacityKnownCondition, Status: metav1.ConditionFalse,
				Reason: infrav1.CapacityUnknownReason, Message: err.Error(),
			})
			return ctrl.Result{}, err
		}
	}
	res := capacity.FromVirtualMachine(&spec.VirtualMachineTemplate.Spec, it)
	t.Status.Capacity = res.Capacity
	t.Status.NodeInfo = res.NodeInfo
	cond := metav1.Condition{Type: infrav1.CapacityKnownCondition, Status: metav1.ConditionTrue, Reason: res.Reason, Message: res.Message}
	if !res.Known() {
		cond.Status = metav1.ConditionFalse
	}
	conditions.Set(t, cond)
	return ctrl.Result{}, nil
}

// instancetype reads the selected instance type; nil without error when it
// does not exist.
func (r *KubevirtMachineTemplateReconciler) instancetype(ctx context.Context, spec *infrav1.KubevirtMachineSpec, ns string, m *kubevirtv1.InstancetypeMatcher) (*instancetypev1beta1.VirtualMachineInstancetypeSpec, error) {
	reader, infraNS, err := r.Checker.ReaderFor(ctx, spec.InfraClusterSecretRef, ns, r.Client.Scheme())
	if err != nil {
		return nil, err
	}
	if vmNS := spec.VirtualMachineTemplate.ObjectMeta.Namespace; vmNS != "" {
		infraNS = vmNS
	}
	var obj client.Object
	var out *instancetypev1beta1.VirtualMachineInstancetypeSpec
	key := types.NamespacedName{Name: m.Name}
	if m.Kind == "VirtualMachineInstancetype" || m.Kind == "virtualmachineinstancetype" {
		o := &instancetypev1beta1.VirtualMachineInstancetype{}
		obj, out, key.Namespace = o, &o.Spec, infraNS
	} else {
		o := &instancetypev1beta1.VirtualMachineClusterInstancetype{}
		obj, out = o, &o.Spec
	}
	if err := reader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading instance type %s: %w", m.Name, err)
	}
	return out, nil
}

// SetupWithManager registers the controller.
func (r *KubevirtMachineTemplateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtmachinetemplate")
	return capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtMachineTemplate{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue))).
		WithOptions(options).
		Complete(ctx, r)
}

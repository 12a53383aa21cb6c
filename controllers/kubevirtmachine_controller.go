package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
)

// KubevirtMachineReconciler reconciles KubevirtMachines.
type KubevirtMachineReconciler struct {
	Client   client.Client
	Checker  *infracluster.Checker
	Recorder events.EventRecorder
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch

// Reconcile brings one KubevirtMachine towards its desired state.
func (r *KubevirtMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	km := &infrav1.KubevirtMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, km); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	machine, err := util.GetOwnerMachine(ctx, r.Client, km.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting owner Machine: %w", err)
	}
	var cluster *clusterv1.Cluster
	if machine != nil {
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting Cluster of Machine %s: %w", machine.Name, err)
		}
	}
	if cluster != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(machine), "Cluster", klog.KObj(cluster)))
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, km); err != nil || isPaused || requeue {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(km, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, km, patch.WithOwnedConditions{Conditions: []string{
			infrav1.InfraClusterAvailableCondition, infrav1.ReadyCondition,
		}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachine: %w", err)
		}
	}()

	if !km.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		conditions.Set(km, metav1.Condition{
			Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.WaitingForOwnerReason,
			Message: "waiting for a Machine to own this KubevirtMachine and for its Cluster to exist",
		})
		return ctrl.Result{}, nil
	}

	ref, err := r.infraClusterRef(ctx, km, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	reportInfraCluster(ctx, r.Checker, r.Recorder, km, ref)
	return ctrl.Result{}, nil
}

// infraClusterRef is the machine's own infra cluster reference, else its
// KubevirtCluster's.
func (r *KubevirtMachineReconciler) infraClusterRef(ctx context.Context, km *infrav1.KubevirtMachine, cluster *clusterv1.Cluster) (*corev1.ObjectReference, error) {
	if km.Spec.InfraClusterSecretRef != nil {
		return km.Spec.InfraClusterSecretRef, nil
	}
	infraRef := cluster.Spec.InfrastructureRef
	if infraRef.Kind != "KubevirtCluster" || infraRef.Name == "" {
		return nil, nil
	}
	kc := &infrav1.KubevirtCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: infraRef.Name}, kc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting KubevirtCluster %s: %w", infraRef.Name, err)
	}
	return kc.Spec.InfraClusterSecretRef, nil
}

// SetupWithManager registers the controller and its watches.
func (r *KubevirtMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtmachine")
	filter := predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.KubevirtMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtMachine{}, builder.WithPredicates(filter)).
		WithOptions(options).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("KubevirtMachine"))),
			filter).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			predicates.ClusterPausedTransitions(mgr.GetScheme(), log), filter).
		WatchesMetadata(crdMetadata(),
			handler.EnqueueRequestsFromMapFunc(enqueueAll(mgr.GetClient(), func() client.ObjectList { return &infrav1.KubevirtMachineList{} })),
			kubevirtCRDChanged).
		Complete(ctx, r)
}

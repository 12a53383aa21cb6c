package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
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

// KubevirtClusterReconciler reconciles KubevirtClusters.
type KubevirtClusterReconciler struct {
	Client   client.Client
	Checker  *infracluster.Checker
	Recorder events.EventRecorder
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Reconcile brings one KubevirtCluster towards its desired state.
func (r *KubevirtClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	kc := &infrav1.KubevirtCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, kc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if filteredOut(kc, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}
	if annotations.IsExternallyManaged(kc) {
		// Someone else provides the endpoint and status; leave it to them.
		return ctrl.Result{}, nil
	}

	cluster, err := util.GetOwnerCluster(ctx, r.Client, kc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting owner Cluster: %w", err)
	}
	if cluster != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, kc); err != nil || isPaused || requeue {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(kc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, kc, patch.WithOwnedConditions{Conditions: []string{
			infrav1.InfraClusterAvailableCondition, infrav1.ReadyCondition,
		}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtCluster: %w", err)
		}
	}()

	if !kc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		conditions.Set(kc, metav1.Condition{
			Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.WaitingForOwnerReason,
			Message: "waiting for the Cluster controller to set the owner reference",
		})
		return ctrl.Result{}, nil
	}

	reportInfraCluster(ctx, r.Checker, r.Recorder, kc, kc.Spec.InfraClusterSecretRef)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller and its watches.
func (r *KubevirtClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtcluster")
	return capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtCluster{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue))).
		WithOptions(options).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx,
				infrav1.GroupVersion.WithKind("KubevirtCluster"), mgr.GetClient(), &infrav1.KubevirtCluster{})),
			predicates.ClusterPausedTransitions(mgr.GetScheme(), log),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesMetadata(crdMetadata(),
			handler.EnqueueRequestsFromMapFunc(enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtClusterList{} })),
			kubevirtCRDChanged).
		Complete(ctx, r)
}

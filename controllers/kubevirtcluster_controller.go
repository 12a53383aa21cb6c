package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cpservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
)

// KubevirtClusterReconciler reconciles KubevirtClusters.
type KubevirtClusterReconciler struct {
	Client   client.Client
	Clients  *infracluster.Clients
	Recorder events.EventRecorder
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string

	controller capicontroller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Reconcile brings one KubevirtCluster towards its desired state.
func (r *KubevirtClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	kc := &infrav1.KubevirtCluster{}
	user := infracluster.User{Kind: "KubevirtCluster", NamespacedName: req.NamespacedName}
	if err := r.Client.Get(ctx, req.NamespacedName, kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(user)
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
		if kc.DeletionTimestamp.IsZero() {
			if added, err := finalizers.EnsureFinalizer(ctx, r.Client, kc, infrav1.ClusterFinalizer); err != nil || added {
				return ctrl.Result{}, err
			}
		}
	}

	helper, err := patch.NewHelper(kc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if conditions.Has(kc, infrav1.ControlPlaneEndpointReadyCondition) {
			if err := conditions.SetSummaryCondition(kc, kc, infrav1.ReadyCondition, conditions.ForConditionTypes{
				infrav1.InfraClusterAvailableCondition, infrav1.ControlPlaneEndpointReadyCondition}); err != nil && rerr == nil {
				rerr = err
			}
		}
		err := helper.Patch(ctx, kc, patch.WithOwnedConditions{Conditions: []string{
			infrav1.InfraClusterAvailableCondition, infrav1.ControlPlaneEndpointReadyCondition, infrav1.ReadyCondition,
		}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtCluster: %w", err)
		}
	}()

	infra, err := r.Clients.Acquire(ctx, kc.Spec.InfraClusterSecretRef, kc.Namespace, kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace, user)
	status := infracluster.APIStatus{Reason: infrav1.InfraClusterUnreachableReason}
	if err != nil {
		status.Message = err.Error()
	} else {
		status = infra.Status
	}
	setInfraCondition(r.Recorder, kc, status)
	// Services are core objects: a reachable infra cluster without KubeVirt
	// can still have them, and they must still be cleaned up.
	reachable := err == nil && status.Reason != infrav1.InfraClusterUnreachableReason

	if !kc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, kc, infra, reachable, user)
	}
	if cluster == nil {
		conditions.Set(kc, metav1.Condition{
			Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.WaitingForOwnerReason,
			Message: "waiting for the Cluster controller to set the owner reference",
		})
		return ctrl.Result{}, nil
	}
	if !reachable {
		if err != nil && infracluster.IsConfigError(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: unreachableRetry}, nil
	}
	nodes := &corev1.NodeList{}
	if err := infra.Client.List(ctx, nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing infra nodes for failure domains: %w", err)
	}
	kc.Status.FailureDomains = failuredomains.Status(kc.Spec.FailureDomains, nodes.Items)
	return ctrl.Result{}, r.reconcileEndpoint(ctx, kc, cluster, infra)
}

// reconcileEndpoint keeps the control-plane Service and fills in the
// endpoint parts the user left empty.
func (r *KubevirtClusterReconciler) reconcileEndpoint(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra) error {
	var owner *metav1.OwnerReference
	if !infra.External {
		owner = metav1.NewControllerRef(kc, infrav1.GroupVersion.WithKind("KubevirtCluster"))
	}
	svc, err := cpservice.Ensure(ctx, infra.Client, kc, cluster.Name, infra.Namespace, owner)
	if err != nil {
		r.setEndpointCondition(kc, metav1.ConditionFalse, infrav1.ServiceFailedReason, err.Error())
		return err
	}
	ep, ok, wait := cpservice.Endpoint(kc, svc)
	if !ok {
		r.setEndpointCondition(kc, metav1.ConditionFalse, infrav1.WaitingForEndpointReason, wait)
		return nil
	}
	// Only the parts the user left empty are filled; a set endpoint is never
	// overwritten.
	if kc.Spec.ControlPlaneEndpoint.Host == "" {
		kc.Spec.ControlPlaneEndpoint.Host = ep.Host
	}
	if kc.Spec.ControlPlaneEndpoint.Port == 0 {
		kc.Spec.ControlPlaneEndpoint.Port = ep.Port
	}
	r.setEndpointCondition(kc, metav1.ConditionTrue, infrav1.EndpointReadyReason,
		fmt.Sprintf("the control plane is reached at %s:%d", kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port))
	kc.Status.Ready = true
	kc.Status.Initialization.Provisioned = ptr.To(true)
	return nil
}

func (r *KubevirtClusterReconciler) setEndpointCondition(kc *infrav1.KubevirtCluster, status metav1.ConditionStatus, reason, message string) {
	if prev := conditions.Get(kc, infrav1.ControlPlaneEndpointReadyCondition); prev == nil || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if reason == infrav1.ServiceFailedReason {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(kc, nil, eventType, reason, "ReconcileEndpoint", "%s", message)
	}
	conditions.Set(kc, metav1.Condition{Type: infrav1.ControlPlaneEndpointReadyCondition, Status: status, Reason: reason, Message: message})
}

// reconcileDelete removes the control-plane Service, then the finalizer. An
// unreachable infra cluster keeps the finalizer.
func (r *KubevirtClusterReconciler) reconcileDelete(ctx context.Context, kc *infrav1.KubevirtCluster, infra *infracluster.Infra, reachable bool, user infracluster.User) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(kc, infrav1.ClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	if !reachable {
		conditions.Set(kc, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.DeletingReason,
			Message: "cannot delete the control-plane Service until the infra cluster is reachable"})
		return ctrl.Result{RequeueAfter: unreachableRetry}, nil
	}
	gone, err := cpservice.Delete(ctx, infra.Client, kc, infra.Namespace)
	if err != nil || !gone {
		conditions.Set(kc, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.DeletingReason,
			Message: "waiting for the control-plane Service to be deleted"})
		return ctrl.Result{}, err
	}
	r.Clients.Release(user)
	controllerutil.RemoveFinalizer(kc, infrav1.ClusterFinalizer)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller and its watches, including the
// control-plane Services on every infra cluster in use.
func (r *KubevirtClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtcluster")
	c, err := capicontroller.NewControllerManagedBy(mgr, log).
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
		Build(ctx, r)
	if err != nil {
		return err
	}
	r.controller = c
	allClusters := enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtClusterList{} })
	r.Clients.AddWatches(func(infra *infracluster.Infra) error {
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&corev1.Service{}), handler.EnqueueRequestsFromMapFunc(ownerToRequest))); err != nil {
			return err
		}
		// Zones come and go with infra nodes; only label changes matter.
		return r.controller.Watch(source.Kind(infra.Cache, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(allClusters),
			predicate.LabelChangedPredicate{}))
	})
	return nil
}

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
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// KubevirtClusterReconciler reconciles KubevirtClusters.
type KubevirtClusterReconciler struct {
	Client   client.Client
	Clients  *infracluster.Clients
	Recorder events.EventRecorder
	// Isolation are the provider-wide isolation settings.
	Isolation isolation.Options
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string
	// ClusterCache reaches tenant clusters, to hand them their infra
	// credential.
	ClusterCache clustercache.ClusterCache
	// Now is the clock tenant credentials are renewed by, and the load
	// balancer fallback's; nil means time.Now.
	Now func() time.Time
	// LoadBalancerFallback is how long a LoadBalancer control-plane
	// Service may wait for an address before the endpoint falls back
	// (pkg/cluster/controlplaneservice FallbackEndpoint); 0 waits forever.
	LoadBalancerFallback time.Duration

	controller capicontroller.Controller
	service    *cluster.Service
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusteridentities,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// The labels of what a VM in a shared infra namespace clones from, and of
// the DRA claims a VM names (pkg/infra/tenancy CheckOwned).
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources,verbs=get
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims;resourceclaimtemplates,verbs=get
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// The tenant credential (docs/tenant-cloud.md): its ServiceAccount, token
// and RoleBinding to one of the shipped ClusterRoles, which the provider
// may bind and read by name but whose verbs it does not hold; Roles only to
// remove those an earlier release minted.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;bind,resourceNames=capkv-tenant-ccm;capkv-tenant-csi;capkv-tenant-ccm-csi
// The isolation policies open the management cluster's API server
// endpoints to VMs that use the credential (pkg/cluster/tenantcloud APIEndpoints).
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// The control plane's golden image is imported before the cluster is
// provisioned (pkg/cluster reconcileControlPlaneImage): KubeadmControlPlane
// names the template; another provider's control plane needs its own grant.
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create;patch

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

	owner, err := util.GetOwnerCluster(ctx, r.Client, kc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting owner Cluster: %w", err)
	}
	if owner != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(owner)))
		if annotations.IsPaused(owner, kc) {
			_, _, err := paused.EnsurePausedCondition(ctx, r.Client, owner, kc)
			return ctrl.Result{}, err
		}
		if kc.DeletionTimestamp.IsZero() {
			if added, err := finalizers.EnsureFinalizer(ctx, r.Client, kc, infrav1.ClusterFinalizer); err != nil || added {
				return ctrl.Result{}, err
			}
		}
	}

	if !kc.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(kc, infrav1.ClusterFinalizer) {
		return ctrl.Result{}, nil
	}

	stored := kc.DeepCopy()
	if owner != nil {
		outcome.MarkNotPaused(kc)
	}
	defer func() {
		if owner != nil && kc.DeletionTimestamp.IsZero() {
			outcome.Summarize(kc, append([]string{infrav1.InfraClusterAvailableCondition}, cluster.Conditions...))
		}
		if err := patchOnce(ctx, r.Client, stored, kc, true); err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtCluster: %w", err)
		}
	}()

	spec := field.NewPath("spec")
	access := r.Clients.Open(ctx, tenancy.ClusterSource(&kc.Spec, spec), kc.Namespace, tenancy.ClusterRequest(&kc.Spec, spec), user)
	// The same rule for every kind: see infracluster.Access.
	outcome.RecordWarning(r.Recorder, kc, infrav1.InfraClusterAvailableCondition, access.Outcome)
	if !kc.DeletionTimestamp.IsZero() {
		o, err := r.service.Delete(ctx, &cluster.Scope{KubevirtCluster: kc, Access: access})
		if err != nil || !o.IsDone() {
			return o.Result(), err
		}
		r.Clients.Release(user)
		controllerutil.RemoveFinalizer(kc, infrav1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}
	// clusterctl move cannot take VMs along that run on this cluster.
	movable.BlockIfLocalInfra(kc, kc.Spec.InfraClusterSecretRef == nil)
	if owner == nil {
		outcome.Set(kc, infrav1.ReadyCondition, outcome.Wait(infrav1.WaitingForOwnerReason,
			"waiting for the Cluster controller to set the owner reference"))
		return ctrl.Result{}, nil
	}
	o, err := r.service.Reconcile(ctx, &cluster.Scope{KubevirtCluster: kc, Cluster: owner, Access: access})
	return o.Result(), err
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
			handler.EnqueueRequestsFromMapFunc(recheckAll(r.Clients, mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtClusterList{} })),
			kubevirtCRDChanged).
		// An administrator's grant, or its withdrawal, is acted on at once.
		WatchesMetadata(identityMetadata(),
			handler.EnqueueRequestsFromMapFunc(enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtClusterList{} }))).
		WatchesRawSource(lostInfraSource(r.Clients, "KubevirtCluster")).
		// A template naming its golden volume, or appearing, wakes the
		// clusters that wait for their control plane's image.
		Watches(&infrav1.KubevirtMachineTemplate{},
			handler.EnqueueRequestsFromMapFunc(unprovisionedClusters(mgr.GetClient(), r.WatchFilterValue))).
		// A tenant API server that becomes reachable takes its credential.
		WatchesRawSource(r.ClusterCache.GetClusterSource("kubevirtcluster", util.ClusterToInfrastructureMapFunc(ctx,
			infrav1.GroupVersion.WithKind("KubevirtCluster"), mgr.GetClient(), &infrav1.KubevirtCluster{}))).
		Build(ctx, r)
	if err != nil {
		return err
	}
	r.controller = c
	r.service = &cluster.Service{Client: r.Client, Recorder: r.Recorder, Isolation: r.Isolation, Networks: &tenantnet.Allocator{},
		TenantCloud:          &tenantcloud.Keeper{ClusterCache: r.ClusterCache, Recorder: r.Recorder, Now: r.Now},
		LoadBalancerFallback: r.LoadBalancerFallback, Now: r.Now}
	allClusters := enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtClusterList{} })
	r.Clients.AddWatches(func(infra *infracluster.Infra) error {
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&corev1.Service{}), handler.EnqueueRequestsFromMapFunc(ownerToRequest))); err != nil {
			return err
		}
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&networkingv1.NetworkPolicy{}), handler.EnqueueRequestsFromMapFunc(ownerToRequest))); err != nil {
			return err
		}
		if err := r.watchNetworks(infra, allClusters); err != nil {
			return err
		}
		// A golden import's end wakes the clusters that name the volume.
		if err := r.controller.Watch(source.Kind(infra.Cache, client.Object(&cdiv1.DataVolume{}),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return listRequests(ctx, mgr.GetClient(), &infrav1.KubevirtClusterList{},
					client.MatchingFields{GoldenImageIndex: goldenIndexValue(infra.Secret, o.GetNamespace(), o.GetName())})
			}), isGolden)); err != nil {
			return err
		}
		// Zones come and go with infra nodes, and a zone whose nodes are all
		// down, or all tainted, takes no new control-plane machine: only
		// label, usability and taint changes matter, not status heartbeats. A kubeconfig
		// that may not list nodes gets no watch (the cache would never
		// sync); its clusters must list failure domains explicitly.
		if !mayListNodes(infra) {
			return nil
		}
		usabilityChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			oldNode, okOld := e.ObjectOld.(*corev1.Node)
			newNode, okNew := e.ObjectNew.(*corev1.Node)
			return okOld && okNew && (failuredomains.Usable(oldNode) != failuredomains.Usable(newNode) ||
				failuredomains.Tainted(oldNode) != failuredomains.Tainted(newNode))
		}}
		return r.controller.Watch(source.Kind(infra.Cache, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(allClusters),
			predicate.Or[client.Object](predicate.LabelChangedPredicate{}, usabilityChanged)))
	})
	return nil
}

// watchNetworks watches Multus networks on infra clusters that have Multus.
// A generated network wakes its cluster; a deleted one wakes every cluster,
// since its VLAN is free again; any other (a template) wakes every cluster,
// so a template created or fixed after its clusters is picked up. Metadata
// is enough: every change bumps the resource version.
func (r *KubevirtClusterReconciler) watchNetworks(infra *infracluster.Infra, allClusters handler.MapFunc) error {
	if _, err := infra.Client.RESTMapper().RESTMapping(tenantnet.GVK.GroupKind(), tenantnet.GVK.Version); err != nil {
		return nil // no Multus on this infra cluster
	}
	nads := &metav1.PartialObjectMetadata{}
	nads.SetGroupVersionKind(tenantnet.GVK)
	enqueue := func(q workqueue.TypedRateLimitingInterface[ctrl.Request], reqs []ctrl.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	changed := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		if reqs := ownerToRequest(ctx, o); len(reqs) > 0 {
			enqueue(q, reqs)
			return
		}
		enqueue(q, allClusters(ctx, o))
	}
	return r.controller.Watch(source.Kind(infra.Cache, client.Object(nads), handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			changed(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			changed(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(q, allClusters(ctx, e.Object))
		},
	}))
}

// unprovisionedClusters maps an event to the KubevirtClusters of the
// object's namespace not yet provisioned: only they wait for their control
// plane's golden image.
func unprovisionedClusters(c client.Reader, watchFilter string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		opts := []client.ListOption{client.InNamespace(obj.GetNamespace())}
		if watchFilter != "" {
			opts = append(opts, client.MatchingLabels{clusterv1.WatchLabel: watchFilter})
		}
		return listRequestsIf(ctx, c, &infrav1.KubevirtClusterList{}, func(o client.Object) bool {
			return !ptr.Deref(o.(*infrav1.KubevirtCluster).Status.Initialization.Provisioned, false)
		}, opts...)
	}
}

// mayListNodes reports whether the infra cluster lets the provider list
// nodes.
func mayListNodes(infra *infracluster.Infra) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return !apierrors.IsForbidden(infra.APIReader.List(ctx, &corev1.NodeList{}, client.Limit(1)))
}

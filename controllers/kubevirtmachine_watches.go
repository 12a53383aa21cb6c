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
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	capicontroller "sigs.k8s.io/cluster-api/util/controller"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// SetupWithManager registers the controller and its watches: its own
// objects, Machines, Clusters and Secrets on the management cluster, CRDs
// of KubeVirt and CDI, and, through Clients, the VMs, VMIs and DataVolumes
// of every infra cluster in use.
func (r *KubevirtMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubevirtmachine")
	filter := predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.KubevirtMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	// The KubevirtMachine is watched without a generation predicate on
	// purpose: a status patch must trigger the next reconcile where the
	// service waits on its own state. It records status.goldenImage and
	// returns before touching the golden volume, so that the golden image
	// controller, which counts users from status, sees the user first; the
	// patch that saves it brings the machine back to create the volume.
	b := capicontroller.NewControllerManagedBy(mgr, log).
		For(&infrav1.KubevirtMachine{}, builder.WithPredicates(filter)).
		WithOptions(options).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("KubevirtMachine"))),
			filter, machineChangedForInfra).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			predicates.ClusterPausedTransitions(mgr.GetScheme(), log), filter).
		WatchesMetadata(crdMetadata(),
			handler.EnqueueRequestsFromMapFunc(recheckAll(r.Clients, mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtMachineList{} })),
			kubevirtCRDChanged).
		// An administrator's grant, or its withdrawal, is acted on at once.
		WatchesMetadata(identityMetadata(),
			handler.EnqueueRequestsFromMapFunc(enqueueAll(mgr.GetClient(), r.WatchFilterValue, func() client.ObjectList { return &infrav1.KubevirtMachineList{} }))).
		WatchesMetadata(SecretMetadata(), handler.EnqueueRequestsFromMapFunc(r.secretToMachines)).
		// A claim's address, or the IPAM provider's reason for not giving
		// one, wakes the machine that waits for it (docs/ipam.md).
		Owns(&ipamv1.IPAddressClaim{}, filter)
	b = b.WatchesRawSource(r.ClusterCache.GetClusterSource("kubevirtmachine", clusterToMachines)).
		WatchesRawSource(lostInfraSource(r.Clients, "KubevirtMachine"))
	c, err := b.Build(ctx, r)
	if err != nil {
		return err
	}
	r.controller = c
	r.Clients.AddWatches(r.watchInfra)
	return nil
}

// watchInfra adds the watches on one infra cluster's cache.
func (r *KubevirtMachineReconciler) watchInfra(infra *infracluster.Infra) error {
	for _, obj := range []client.Object{&kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}} {
		if err := r.controller.Watch(source.Kind(infra.Cache, obj, handler.EnqueueRequestsFromMapFunc(ownerToRequest))); err != nil {
			return err
		}
	}
	if err := r.controller.Watch(source.Kind[client.Object](infra.Cache, &cdiv1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(
		func(ctx context.Context, dv client.Object) []reconcile.Request {
			if dv.GetLabels()[goldenplan.Label] == "true" {
				return r.goldenToMachines(ctx, infra.Secret, dv)
			}
			return ownerToRequest(ctx, dv)
		}))); err != nil {
		return err
	}
	// A quota or limit range that changes may now admit what it refused
	// (docs/operations.md#quota).
	for _, obj := range []client.Object{&corev1.ResourceQuota{}, &corev1.LimitRange{}} {
		if err := r.controller.Watch(source.Kind(infra.Cache, obj, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return refusedInNamespace(ctx, infra.Cache, o.GetNamespace())
			}))); err != nil {
			return err
		}
	}
	return nil
}

// refusedInNamespace maps the namespace's instances and DataVolumes whose
// launcher pod or claim a quota or limit range refused to their machines.
func refusedInNamespace(ctx context.Context, c client.Reader, namespace string) []reconcile.Request {
	var reqs []reconcile.Request
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := c.List(ctx, vmis, client.InNamespace(namespace)); err == nil {
		for i := range vmis.Items {
			if _, refused := vmstatus.LauncherRefusal(&vmis.Items[i]); refused {
				reqs = append(reqs, ownerToRequest(ctx, &vmis.Items[i])...)
			}
		}
	}
	dvs := &cdiv1.DataVolumeList{}
	if err := c.List(ctx, dvs, client.InNamespace(namespace)); err == nil {
		for i := range dvs.Items {
			if _, refused := vmstatus.DiskRefusal(&dvs.Items[i]); refused {
				reqs = append(reqs, ownerToRequest(ctx, &dvs.Items[i])...)
			}
		}
	}
	return reqs
}

// goldenToMachines maps a golden volume to the machines waiting for it:
// those naming it in their saved status, and the unprovisioned machines
// cloned from a template naming it. Such a machine does not save its
// status for the volume at once (the template is the user the golden
// image controller counts), and until its status settles only the
// template says it waits: without the template, the end of a long import
// would reach it only at its settle time.
func (r *KubevirtMachineReconciler) goldenToMachines(ctx context.Context, infraSecret types.NamespacedName, dv client.Object) []reconcile.Request {
	value := goldenIndexValue(infraSecret, dv.GetNamespace(), dv.GetName())
	reqs := listRequests(ctx, r.Client, &infrav1.KubevirtMachineList{}, client.MatchingFields{GoldenImageIndex: value})
	templates := &infrav1.KubevirtMachineTemplateList{}
	if err := r.Client.List(ctx, templates, client.MatchingFields{GoldenImageIndex: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the templates of a golden volume", "volume", client.ObjectKeyFromObject(dv))
		return reqs
	}
	unprovisioned := func(o client.Object) bool {
		return !ptr.Deref(o.(*infrav1.KubevirtMachine).Status.Initialization.Provisioned, false)
	}
	for i := range templates.Items {
		t := &templates.Items[i]
		reqs = append(reqs, listRequestsIf(ctx, r.Client, &infrav1.KubevirtMachineList{}, unprovisioned,
			client.InNamespace(t.Namespace), client.MatchingFields{ClonedFromTemplateIndex: t.Name})...)
	}
	return reqs
}

// ownerToRequest maps an infra object to the object it was made for, by
// the owner annotation: a VM, VMI or DataVolume to its KubevirtMachine (the
// VM builder puts it on the VM, its instance template and its DataVolume
// templates, and KubeVirt copies it), a Service to its KubevirtCluster.
func ownerToRequest(_ context.Context, obj client.Object) []reconcile.Request {
	if reqs := annotatedOwner(obj, infrav1.OwnerAnnotation); reqs != nil {
		return reqs
	}
	return poolInstanceToMachine(obj)
}

// poolInstanceToMachine maps a VM of a VirtualMachinePool, or its instance,
// to the KubevirtMachine of the same name the KubevirtMachinePool made for
// it, in the pool's namespace.
func poolInstanceToMachine(obj client.Object) []reconcile.Request {
	switch obj.(type) {
	case *kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance:
	default:
		return nil
	}
	reqs := annotatedOwner(obj, infrav1.PoolOwnerAnnotation)
	for i := range reqs {
		reqs[i].Name = obj.GetName()
	}
	return reqs
}

// annotatedOwner is the request for the object named "<namespace>/<name>"
// by annotation key of obj, if any.
func annotatedOwner(obj client.Object, key string) []reconcile.Request {
	ns, name, ok := strings.Cut(obj.GetAnnotations()[key], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// machineChangedForInfra passes the Machine updates a KubevirtMachine acts
// on: its spec (bootstrap data, version, failure domain), labels,
// annotations, deletion and nodeRef. Cluster API rewrites a Machine's
// status conditions whenever the KubevirtMachine's change; waking the
// KubevirtMachine for its own echo would spend Cluster API's one reconcile
// a second per object (util/controller's ReconcilerRateLimiting) on
// nothing, and the bootstrap data arriving just after would wait out the
// rest of that second.
var machineChangedForInfra = predicate.Or[client.Object](
	predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{},
	predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldMachine, okOld := e.ObjectOld.(*clusterv1.Machine)
		newMachine, okNew := e.ObjectNew.(*clusterv1.Machine)
		if !okOld || !okNew {
			return true
		}
		return !oldMachine.DeletionTimestamp.Equal(newMachine.DeletionTimestamp) ||
			oldMachine.Status.NodeRef != newMachine.Status.NodeRef
	}})

// SecretMetadata is the metadata-only Secret the controllers watch; the
// manager's cache strips it to what they read.
func SecretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// secretToMachines maps a Secret to the KubevirtMachines that read it: as
// bootstrap data of their Machine, as network data, or as the kubeconfig of
// their infra cluster (theirs or their KubevirtCluster's). A changed
// kubeconfig thus rebuilds the infra cluster's client at once.
func (r *KubevirtMachineReconciler) secretToMachines(ctx context.Context, secret client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(secret.GetNamespace()), client.MatchingFields{bootstrapSecretIndex: secret.GetName()}); err == nil {
		for _, m := range machines.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}})
		}
	}
	key := secret.GetNamespace() + "/" + secret.GetName()
	reqs = append(reqs, listRequests(ctx, r.Client, &infrav1.KubevirtMachineList{}, client.MatchingFields{secretRefIndex: key})...)
	kcs := &infrav1.KubevirtClusterList{}
	if err := r.Client.List(ctx, kcs, client.MatchingFields{secretRefIndex: key}); err != nil {
		return reqs
	}
	for _, kc := range kcs.Items {
		cluster := kc.Labels[clusterv1.ClusterNameLabel]
		if cluster == "" {
			continue
		}
		reqs = append(reqs, listRequestsIf(ctx, r.Client, &infrav1.KubevirtMachineList{}, func(o client.Object) bool {
			return o.(*infrav1.KubevirtMachine).Spec.InfraClusterSecretRef == nil
		}, client.InNamespace(kc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})...)
	}
	return reqs
}

// watchNodes watches the tenant cluster's Nodes once it is connected, so a
// Node appearing triggers setting its providerID.
func (r *KubevirtMachineReconciler) watchNodes(ctx context.Context, cluster *clusterv1.Cluster) error {
	err := r.ClusterCache.Watch(ctx, client.ObjectKeyFromObject(cluster), clustercache.NewWatcher(clustercache.WatcherOptions{
		Name:    "kubevirtmachine-watchNodes",
		Watcher: r.controller,
		Kind:    &corev1.Node{},
		EventHandler: handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, node client.Object) []reconcile.Request {
			return r.nodeToMachines(ctx, cluster, node)
		}),
	}))
	if err != nil && !isNotConnected(err) {
		return err
	}
	return nil
}

// nodeToMachines maps a tenant Node to the KubevirtMachines of its cluster
// whose VM has its name as hostname.
func (r *KubevirtMachineReconciler) nodeToMachines(ctx context.Context, cluster *clusterv1.Cluster, node client.Object) []reconcile.Request {
	return listRequests(ctx, r.Client, &infrav1.KubevirtMachineList{}, client.InNamespace(cluster.Namespace),
		client.MatchingFields{nodeNameIndex: cluster.Name + "/" + node.GetName()})
}

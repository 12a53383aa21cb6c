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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// GoldenRequest names a golden volume: its infra cluster (the kubeconfig
// Secret, empty for the management cluster) and its DataVolume.
type GoldenRequest struct {
	InfraSecret types.NamespacedName
	types.NamespacedName
}

// GoldenImageReconciler deletes golden volumes a retention period after
// their last user is gone: a KubevirtMachine, KubevirtMachineTemplate or
// KubevirtMachinePool naming them in status.goldenImage, or a root disk
// DataVolume on the infra cluster cloned from them. The root disks count
// because the infra cluster may be shared: after clusterctl move, or
// beside another management cluster, machines this one no longer sees
// still run on disks cloned from the volume, and their provider names it.
// Only volumes the provider made carry the golden label; admin-provided
// PVCs and DataSources are never touched.
type GoldenImageReconciler struct {
	Client  client.Client
	Clients *infracluster.Clients
	// Collector counts, keeps and deletes the volumes.
	Collector *goldenkeeper.Collector

	controller controller.TypedController[GoldenRequest]
}

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create;patch;delete

// Reconcile counts the users of one golden volume and hands it to the
// Collector, which deletes it when its retention after the last one has
// passed.
func (r *GoldenImageReconciler) Reconcile(ctx context.Context, req GoldenRequest) (ctrl.Result, error) {
	user := infracluster.User{Kind: "GoldenImage", NamespacedName: types.NamespacedName{
		Namespace: req.InfraSecret.String() + "|" + req.Namespace, Name: req.Name}}
	// The machines that asked for the volume were allowed their infra
	// namespace; the Secret is opened as its own namespace's.
	src, ns := tenancy.Source{}, req.Namespace
	if req.InfraSecret.Name != "" {
		src.SecretRef = &corev1.ObjectReference{Kind: "Secret", Namespace: req.InfraSecret.Namespace, Name: req.InfraSecret.Name}
		ns = req.InfraSecret.Namespace
	}
	// Holding the infra cluster keeps its cache, and so this watch, alive
	// while the golden volume exists, even when no machine uses it.
	access := r.Clients.Open(ctx, src, ns, tenancy.Request{Namespace: req.Namespace}, user)
	if !access.Available() {
		if access.Outcome.Reason == infrav1.InfraClusterSecretInvalidReason {
			// The kubeconfig Secret is gone or broken: nothing to hold on
			// to until a machine names it again.
			r.Clients.Release(user)
		}
		return access.Outcome.Result(), nil
	}
	infra := access.Infra
	dv := &cdiv1.DataVolume{}
	volume := req.InfraSecret.String() + "|" + req.Namespace + "/" + req.Name
	if err := infra.Client.Get(ctx, req.NamespacedName, dv); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(user)
			metrics.GoldenImageVolumes.Forget(volume)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if dv.Labels[goldenplan.Label] != "true" || !dv.DeletionTimestamp.IsZero() {
		metrics.GoldenImageVolumes.Forget(volume)
		return ctrl.Result{}, nil
	}
	users, err := r.users(ctx, req)
	if err == nil && users == 0 {
		users, err = goldenkeeper.Clones(ctx, infra.Client, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	requeue, err := r.Collector.Collect(ctx, infra.Client, dv, users, volume)
	return ctrl.Result{RequeueAfter: requeue}, err
}

// users counts the KubevirtMachines, templates, pools and clusters (waiting
// for their control plane's image) naming the volume.
func (r *GoldenImageReconciler) users(ctx context.Context, req GoldenRequest) (int, error) {
	value := goldenIndexValue(req.InfraSecret, req.Namespace, req.Name)
	users := 0
	for _, list := range []client.ObjectList{&infrav1.KubevirtMachineList{}, &infrav1.KubevirtMachineTemplateList{},
		&infrav1.KubevirtMachinePoolList{}, &infrav1.KubevirtClusterList{}} {
		if err := r.Client.List(ctx, list, client.MatchingFields{GoldenImageIndex: value}); err != nil {
			return 0, err
		}
		users += meta.LenList(list)
	}
	return users, nil
}

// SetupWithManager registers the controller: KubevirtMachines and templates
// on the management cluster, and golden volumes on every infra cluster.
func (r *GoldenImageReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.TypedOptions[GoldenRequest]) error {
	c, err := builder.TypedControllerManagedBy[GoldenRequest](mgr).
		Named("goldenimage").
		WithOptions(options).
		WatchesRawSource(source.TypedKind[client.Object, GoldenRequest](mgr.GetCache(), &infrav1.KubevirtMachine{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []GoldenRequest {
				return requestOf(o.(*infrav1.KubevirtMachine).Status.GoldenImage)
			}))).
		WatchesRawSource(source.TypedKind[client.Object, GoldenRequest](mgr.GetCache(), &infrav1.KubevirtMachineTemplate{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []GoldenRequest {
				return requestOf(o.(*infrav1.KubevirtMachineTemplate).Status.GoldenImage)
			}))).
		WatchesRawSource(source.TypedKind[client.Object, GoldenRequest](mgr.GetCache(), &infrav1.KubevirtMachinePool{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []GoldenRequest {
				return requestOf(o.(*infrav1.KubevirtMachinePool).Status.GoldenImage)
			}))).
		WatchesRawSource(source.TypedKind[client.Object, GoldenRequest](mgr.GetCache(), &infrav1.KubevirtCluster{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []GoldenRequest {
				return requestOf(o.(*infrav1.KubevirtCluster).Status.GoldenImage)
			}))).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	r.Clients.AddWatches(func(infra *infracluster.Infra) error {
		return r.controller.Watch(source.TypedKind[client.Object, GoldenRequest](infra.Cache, &cdiv1.DataVolume{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []GoldenRequest {
				// A clone's change wakes the volume it was cloned from
				// (one that is not golden is left at once).
				if source := goldenkeeper.CloneSource(o.(*cdiv1.DataVolume)); source != nil {
					return []GoldenRequest{{InfraSecret: infra.Secret, NamespacedName: *source}}
				}
				return []GoldenRequest{{InfraSecret: infra.Secret, NamespacedName: client.ObjectKeyFromObject(o)}}
			}), goldenOrClone))
	})
	return nil
}

var isGolden = predicate.NewTypedPredicateFuncs[client.Object](func(o client.Object) bool {
	return o.GetLabels()[goldenplan.Label] == "true"
})

var goldenOrClone = predicate.NewTypedPredicateFuncs[client.Object](func(o client.Object) bool {
	dv, ok := o.(*cdiv1.DataVolume)
	return o.GetLabels()[goldenplan.Label] == "true" || ok && goldenkeeper.CloneSource(dv) != nil
})

func requestOf(s *infrav1.GoldenImageStatus) []GoldenRequest {
	if s == nil || s.Name == "" {
		return nil
	}
	req := GoldenRequest{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}}
	if ns, name, ok := strings.Cut(s.InfraCluster, "/"); ok {
		req.InfraSecret = types.NamespacedName{Namespace: ns, Name: name}
	}
	return []GoldenRequest{req}
}

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
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// listRequests lists the objects of list's kind that opts select, from the
// cache, and maps each to a request for itself: the one way a watch maps an
// event to the objects it concerns. A failed list maps to nothing; the
// objects' own events and resyncs bring them back.
func listRequests(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	return listRequestsIf(ctx, c, list, nil, opts...)
}

// listRequestsIf is listRequests for the listed objects keep accepts (all
// when keep is nil).
func listRequestsIf(ctx context.Context, c client.Reader, list client.ObjectList, keep func(client.Object) bool, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing objects to map an event to", "list", fmt.Sprintf("%T", list))
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok && (keep == nil || keep(o)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// kubevirtCRDChanged passes events of CustomResourceDefinitions of the KubeVirt
// and CDI groups, so that installing KubeVirt after the provider triggers a
// new check without polling.
var kubevirtCRDChanged = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isKubevirtCRD(e.Object) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return isKubevirtCRD(e.ObjectNew) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isKubevirtCRD(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func isKubevirtCRD(obj client.Object) bool {
	// CRD names are <plural>.<group>.
	_, group, _ := strings.Cut(obj.GetName(), ".")
	return infracluster.RequiredGroups.Has(group)
}

// crdMetadata is the metadata-only watch object for CRDs.
func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return m
}

// identityMetadata is the metadata-only watch object for
// KubevirtClusterIdentities.
func identityMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(infrav1.GroupVersion.WithKind(infrav1.KubevirtClusterIdentityKind))
	return m
}

// recheckAll maps a change of a KubeVirt or CDI CustomResourceDefinition to
// every object of a kind, after making every infra cluster's APIs be asked
// again: Clients remembers that they were served.
func recheckAll(clients *infracluster.Clients, c client.Reader, watchFilter string, newList func() client.ObjectList) handler.MapFunc {
	all := enqueueAll(c, watchFilter, newList)
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		clients.ForgetAPIs()
		return all(ctx, obj)
	}
}

// enqueueAll maps an event to every object of a kind in the cache, for events
// that concern all of them.
func enqueueAll(c client.Reader, watchFilter string, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var opts []client.ListOption
		if watchFilter != "" {
			// Objects of another manager's watch filter are not ours.
			opts = append(opts, client.MatchingLabels{clusterv1.WatchLabel: watchFilter})
		}
		return listRequests(ctx, c, newList(), opts...)
	}
}

func isNotConnected(err error) bool { return errors.Is(err, clustercache.ErrClusterNotConnected) }

// filteredOut reports whether obj belongs to another manager's watch filter.
// Requests mapped from other objects (infra VMs, Secrets, golden volumes)
// bypass the watch predicates, so reconcilers check it themselves.
func filteredOut(obj client.Object, watchFilter string) bool {
	return watchFilter != "" && obj.GetLabels()[clusterv1.WatchLabel] != watchFilter
}

// lostInfraSource wakes the objects of one kind whose external infra
// cluster's API server went out of reach or came back
// (infracluster.Clients.OnLost), so that each reports it even when it had
// nothing to do there.
func lostInfraSource(clients *infracluster.Clients, kind string) source.Source {
	lost := make(chan event.GenericEvent, 256)
	clients.OnLost(func(u infracluster.User) {
		if u.Kind != kind {
			return
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetNamespace(u.Namespace)
		obj.SetName(u.Name)
		// The request that noticed the loss must not wait for the queue.
		go func() { lost <- event.GenericEvent{Object: obj} }()
	})
	return source.Channel(lost, &handler.EnqueueRequestForObject{})
}

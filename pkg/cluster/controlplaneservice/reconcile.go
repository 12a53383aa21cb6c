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

package controlplaneservice

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
)

// Ensure creates the control-plane Service or corrects its drift, and
// returns the live Service; nil when the cluster wants none (its Service,
// if one was created before, is deleted). Objects of
// the same name without the owner annotation are never taken over.
//
// The community provider's Service of the cluster (adoption.CommunityService)
// is adopted instead when mayAdopt (the KubevirtCluster's own namespace on
// the management cluster): it is marked as this cluster's and keeps the community selector,
// which selects the control-plane VMs it started as well as the
// provider's own, so the endpoint never loses its backends.
func Ensure(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, clusterName, ns string, ref *metav1.OwnerReference, mayAdopt bool) (*corev1.Service, error) {
	want := Desired(kc, clusterName, ns)
	if !Wanted(kc) {
		// Switched to None: a Service left behind would keep exposing the
		// control plane.
		_, err := ownedobject.Delete(ctx, c, &corev1.Service{}, client.ObjectKeyFromObject(want), ownedobject.Key(kc))
		return nil, err
	}
	if want.Namespace != kc.Namespace {
		ref = nil
	}
	if mayAdopt {
		if err := adoptCommunity(ctx, c, want, clusterName, ownedobject.Key(kc), ref); err != nil {
			return nil, err
		}
	}
	live, _, err := ownedobject.Ensure(ctx, c, want, &corev1.Service{}, ownedobject.Key(kc), ref, "control-plane Service",
		func(live, want *corev1.Service) bool {
			if adoption.Adopted(live) {
				want.Spec.Selector = adoption.CommunitySelector(clusterName)
			}
			if !Drifted(live, want) {
				return false
			}
			Apply(live, want)
			return true
		})
	return live, err
}

// adoptCommunity marks the community provider's Service of the cluster,
// if that is what the Service of want's name is, as owner's. One of
// another type or port is not adopted: correcting it would move the
// endpoint the tenant's certificates name.
func adoptCommunity(ctx context.Context, c client.Client, want *corev1.Service, clusterName, owner string, ref *metav1.OwnerReference) error {
	key := client.ObjectKeyFromObject(want)
	live := &corev1.Service{}
	if err := c.Get(ctx, key, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !adoption.CommunityService(live, clusterName) || live.Spec.Type != want.Spec.Type ||
		len(live.Spec.Ports) != 1 || live.Spec.Ports[0].Port != want.Spec.Ports[0].Port {
		return nil
	}
	ownedobject.Mark(live, owner)
	live.Annotations[adoption.AdoptedFromAnnotation] = adoption.CommunityProvider
	if ref != nil {
		live.OwnerReferences = append(live.OwnerReferences, *ref)
	}
	// An update, at the resourceVersion read: the provider's role may
	// update Services, not patch them.
	if err := c.Update(ctx, live); err != nil {
		return fmt.Errorf("adopting the community provider's control-plane Service %s: %w", key, err)
	}
	return nil
}

// Delete deletes the control-plane Service if it is this cluster's, and
// reports whether it is gone.
func Delete(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, ns string) (bool, error) {
	want := Desired(kc, "", ns)
	return ownedobject.Delete(ctx, c, &corev1.Service{}, client.ObjectKeyFromObject(want), ownedobject.Key(kc))
}

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

package isolation

import (
	"context"
	"fmt"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
)

// Ensure creates the cluster's policies in ns, corrects their drift, and
// deletes the ones it no longer wants (a custom policy removed from the
// spec, or isolation turned off). ref, when set, becomes the controller
// reference of created policies.
func Ensure(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, clusterName, ns string, ref *metav1.OwnerReference, opts Options) error {
	want, err := Desired(kc, clusterName, ns, opts)
	if err != nil {
		return err
	}
	if ns != kc.Namespace {
		ref = nil
	}
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p.Name] = true
		_, change, err := ownedobject.Ensure(ctx, c, p, &networkingv1.NetworkPolicy{}, ownedobject.Key(kc), ref, "NetworkPolicy", sync)
		if err != nil {
			return err
		}
		switch change {
		case ownedobject.Created:
			metrics.IsolationPoliciesCreated.Inc()
		case ownedobject.Corrected:
			metrics.IsolationDriftCorrected.Inc()
		}
	}
	return deleteOwned(ctx, c, kc, ns, wanted)
}

// Delete deletes every policy of the cluster in ns and reports whether
// they are all gone.
func Delete(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, ns string) (bool, error) {
	if err := deleteOwned(ctx, c, kc, ns, nil); err != nil {
		return false, err
	}
	left, err := list(ctx, c, kc, ns)
	return len(left) == 0, err
}

func deleteOwned(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, ns string, keep map[string]bool) error {
	policies, err := list(ctx, c, kc, ns)
	if err != nil {
		return err
	}
	for i := range policies {
		if keep[policies[i].Name] {
			continue
		}
		if err := ownedobject.DeleteLive(ctx, c, &policies[i]); err != nil {
			return fmt.Errorf("deleting NetworkPolicy %s/%s: %w", ns, policies[i].Name, err)
		}
	}
	return nil
}

// list returns the policies in ns that carry the cluster's owner
// annotation.
func list(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, ns string) ([]networkingv1.NetworkPolicy, error) {
	all := &networkingv1.NetworkPolicyList{}
	if err := c.List(ctx, all, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing NetworkPolicies in %s: %w", ns, err)
	}
	var mine []networkingv1.NetworkPolicy
	for _, p := range all.Items {
		if ownedobject.IsOwnedBy(&p, ownedobject.Key(kc)) {
			mine = append(mine, p)
		}
	}
	return mine, nil
}

// sync makes the live policy's spec and labels the desired ones; policies
// are wholly the provider's, so any difference is drift.
func sync(live, want *networkingv1.NetworkPolicy) bool {
	changed := false
	if !equality.Semantic.DeepEqual(live.Spec, want.Spec) {
		live.Spec = want.Spec
		changed = true
	}
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			if live.Labels == nil {
				live.Labels = map[string]string{}
			}
			maps.Copy(live.Labels, want.Labels)
			changed = true
			break
		}
	}
	return changed
}

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

package tenantnet

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
)

// Allocator gives clusters their per-cluster networks. Allocation lists
// live objects under a lock, so two clusters reconciled at once never get
// the same VLAN; one lock per manager is enough, as only the leader writes.
type Allocator struct {
	mu sync.Mutex
}

// Result is the network a cluster got.
type Result struct {
	// NAD is the generated NetworkAttachmentDefinition, "namespace/name".
	NAD string
	// VLAN is its VLAN.
	VLAN int32
}

func newNAD() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	return u
}

// Ensure creates or corrects the cluster's network in infra namespace ns.
// c writes (and, for unstructured objects, reads live); reader lists live.
func (a *Allocator) Ensure(ctx context.Context, c client.Client, reader client.Reader, kc *infrav1.KubevirtCluster, clusterName, ns string, ref *metav1.OwnerReference) (Result, error) {
	pc := kc.Spec.Network.PerCluster
	tmpl := newNAD()
	if err := reader.Get(ctx, types.NamespacedName{Namespace: pc.TemplateRef.Namespace, Name: pc.TemplateRef.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return Result{}, &TemplateError{fmt.Sprintf("network template NetworkAttachmentDefinition %s/%s not found", pc.TemplateRef.Namespace, pc.TemplateRef.Name)}
		}
		return Result{}, fmt.Errorf("reading network template %s/%s: %w", pc.TemplateRef.Namespace, pc.TemplateRef.Name, err)
	}
	var first, last int32
	if pc.VLANID == nil {
		var err error
		if first, last, err = Range(tmpl); err != nil {
			return Result{}, err
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	key := types.NamespacedName{Namespace: ns, Name: Name(kc)}
	// The VLAN, once given, stays: the live network's, else the recorded
	// one (the network may have been deleted by hand).
	current := kc.Status.Network.VLANID
	live := newNAD()
	if err := reader.Get(ctx, key, live); err == nil && ownedobject.IsOwnedBy(live, ownedobject.Key(kc)) && VLANOf(live) != 0 {
		current = VLANOf(live)
	} else if client.IgnoreNotFound(err) != nil {
		return Result{}, fmt.Errorf("reading NetworkAttachmentDefinition %s: %w", key, err)
	}
	used, complete, err := usedVLANs(ctx, reader, pc.TemplateRef, ns, key)
	if err != nil {
		return Result{}, err
	}
	if !complete && pc.VLANID == nil && current == 0 {
		return Result{}, &VLANError{"cannot allocate a VLAN unique across the infra cluster: the kubeconfig may not list " +
			"NetworkAttachmentDefinitions in all namespaces; grant that, or set network.perCluster.vlanID"}
	}
	vlan, err := Pick(pc.VLANID, current, used, first, last)
	if err != nil {
		return Result{}, err
	}
	want, err := Render(tmpl, kc, clusterName, ns, vlan)
	if err != nil {
		return Result{}, err
	}
	if ns != kc.Namespace {
		ref = nil
	}
	if _, _, err := ownedobject.Ensure(ctx, c, want, newNAD(), ownedobject.Key(kc), ref, "NetworkAttachmentDefinition", syncNAD); err != nil {
		return Result{}, err
	}
	return Result{NAD: key.String(), VLAN: vlan}, nil
}

// usedVLANs maps the VLANs of every network made from the template, other
// than self, to that network. A kubeconfig that may not list across
// namespaces sees only ns; complete is then false.
func usedVLANs(ctx context.Context, reader client.Reader, ref infrav1.NamespacedRef, ns string, self types.NamespacedName) (used map[int32]string, complete bool, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	sel := client.MatchingLabels{infrav1.NetworkTemplateLabel: TemplateHash(ref)}
	complete = true
	err = reader.List(ctx, list, sel)
	if apierrors.IsForbidden(err) {
		complete = false
		err = reader.List(ctx, list, sel, client.InNamespace(ns))
	}
	if err != nil {
		return nil, false, fmt.Errorf("listing networks made from template %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	used = map[int32]string{}
	for i := range list.Items {
		n := &list.Items[i]
		if n.GetNamespace() == self.Namespace && n.GetName() == self.Name {
			continue
		}
		if v := VLANOf(n); v != 0 {
			used[v] = n.GetNamespace() + "/" + n.GetName()
		}
	}
	return used, complete, nil
}

// syncNAD makes the live network's config, labels and annotations the
// desired ones, keeping annotations others added.
func syncNAD(live, want *unstructured.Unstructured) bool {
	changed := false
	wantConfig, _, _ := unstructured.NestedString(want.Object, "spec", "config")
	if liveConfig, _, _ := unstructured.NestedString(live.Object, "spec", "config"); liveConfig != wantConfig {
		_ = unstructured.SetNestedField(live.Object, wantConfig, "spec", "config")
		changed = true
	}
	for _, pair := range []struct {
		get  func() map[string]string
		set  func(map[string]string)
		want map[string]string
	}{
		{live.GetLabels, live.SetLabels, want.GetLabels()},
		{live.GetAnnotations, live.SetAnnotations, want.GetAnnotations()},
	} {
		cur := pair.get()
		for k, v := range pair.want {
			if cur[k] != v {
				if cur == nil {
					cur = map[string]string{}
				}
				maps.Copy(cur, pair.want)
				pair.set(cur)
				changed = true
				break
			}
		}
	}
	return changed
}

// Delete deletes the cluster's generated network, named "namespace/name"
// as recorded in its status, and reports whether it is gone.
func Delete(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, nad string) (bool, error) {
	ns, name, ok := strings.Cut(nad, "/")
	if !ok {
		return true, nil
	}
	gone, err := ownedobject.Delete(ctx, c, newNAD(), types.NamespacedName{Namespace: ns, Name: name}, ownedobject.Key(kc))
	if err != nil && meta.IsNoMatchError(err) {
		// Multus was removed along with every network: nothing is left.
		return true, nil
	}
	return gone, err
}

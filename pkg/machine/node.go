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

package machine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// InfraLabelsAnnotation on a tenant Node lists the label keys the provider
// copied there from the infra node, so that a key the infra node loses is
// removed again without touching labels someone else set.
const InfraLabelsAnnotation = "capkv.io/infra-node-labels"

// InfraNodeLabelKeys are the infra node label keys copied to tenant Nodes:
// zone and region, then the admin's extra keys.
func InfraNodeLabelKeys(extra []string) []string {
	keys := []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}
	for _, k := range extra {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// infraReadTimeout bounds reads of infra Nodes: an external infra
// kubeconfig may not be allowed to read them.
const infraReadTimeout = 10 * time.Second

// ValidateInfraNodeLabelKey refuses a key that cannot be copied to tenant
// Nodes: not a label key, the tenant's own hostname label, or a key the
// kubelet or Cluster API keeps in sync on Nodes, which would make two
// writers fight over it.
func ValidateInfraNodeLabelKey(key string) error {
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return fmt.Errorf("%q is not a label key: %s", key, strings.Join(msgs, "; "))
	}
	prefix, _, _ := strings.Cut(key, "/")
	switch {
	case key == corev1.LabelHostname:
		return fmt.Errorf("%q is the tenant Node's own hostname", key)
	case strings.HasPrefix(key, "kubernetes.io/") || strings.HasPrefix(key, "beta.kubernetes.io/"):
		return fmt.Errorf("%q is a label the kubelet sets on its own Node", key)
	case slices.ContainsFunc([]string{"node-role.kubernetes.io", "node-restriction.kubernetes.io", "node.cluster.x-k8s.io"}, func(d string) bool {
		return prefix == d || strings.HasSuffix(prefix, "."+d)
	}):
		return fmt.Errorf("%q is in a domain Cluster API syncs from Machines to Nodes", key)
	}
	return nil
}

// syncTenantNode gives the tenant Node the machine's providerID when the
// kubelet did not set one (no cloud provider in the tenant), so that Cluster
// API can match Node and Machine, and the infra node's placement labels
// (zone, region, the admin's extra keys), so tenant workloads can spread by
// infra zone. The Node is found by its name, the VM's hostname, which it
// returns once the Node carries the providerID. Until the
// tenant cluster is reachable and the Node exists, this waits for the
// ClusterCache's events. It looks every time, from the ClusterCache's cache,
// because a Node that registers again (deleted, or the tenant's control
// plane restored) comes back without either; it writes only what differs.
// The infra node is read only when the VM instance runs on another node
// than status.infraNodeName records (the instance's event brings the
// machine here when it moves) or the tenant Node lost the labels, so a
// steady state reads nothing more.
func (s *Service) syncTenantNode(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	km := sc.KubevirtMachine
	if sc.Cluster == nil || km.Spec.ProviderID == nil {
		return "", nil
	}
	c, err := s.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(sc.Cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	hostname := NodeName(km)
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: hostname}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading tenant Node %s: %w", hostname, err)
	}
	before := node.DeepCopy()
	switch node.Spec.ProviderID {
	case *km.Spec.ProviderID:
	case "":
		node.Spec.ProviderID = *km.Spec.ProviderID
	default:
		// Someone else (a cloud controller manager) chose another ID; leave
		// it, Cluster API will not match this Node to the Machine.
		return "", fmt.Errorf("tenant Node %s has providerID %q, not %q", hostname, node.Spec.ProviderID, *km.Spec.ProviderID)
	}
	infraNodeName := ""
	if vmi != nil {
		infraNodeName = vmi.Status.NodeName
	}
	_, synced := node.Annotations[InfraLabelsAnnotation]
	if infraNodeName != "" && (!synced || km.Status.InfraNodeName != infraNodeName) {
		infraNode, err := s.readInfraNode(ctx, sc, infraNodeName)
		if err != nil {
			return "", err
		}
		applyInfraLabels(node, infraNode, s.InfraNodeLabels)
	}
	if !equality.Semantic.DeepEqual(before, node) {
		if err := c.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return "", fmt.Errorf("updating tenant Node %s: %w", hostname, err)
		}
		ctrl.LoggerFrom(ctx).Info("Updated the tenant Node's providerID and infra placement labels", "node", hostname, "infraNode", infraNodeName)
	}
	km.Status.InfraNodeName = infraNodeName
	km.Status.NodeUpdated = true
	return hostname, nil
}

// readInfraNode reads an infra node from the API server, not a cache: it is
// needed only when a VM lands on a node, and a cache would watch every node
// of an infra cluster whose kubeconfig may not allow it. Without permission,
// or when the node is gone, it returns nil: the tenant Node then gets no
// placement labels.
func (s *Service) readInfraNode(ctx context.Context, sc *Scope, name string) (*corev1.Node, error) {
	readCtx, cancel := context.WithTimeout(ctx, infraReadTimeout)
	defer cancel()
	n := &corev1.Node{}
	if err := sc.Access.Infra.APIReader.Get(readCtx, types.NamespacedName{Name: name}, n); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(2).Info("Cannot read the infra node; the tenant Node gets no placement labels", "infraNode", name, "reason", err.Error())
			return nil, nil
		}
		return nil, fmt.Errorf("reading infra node %s: %w", name, err)
	}
	return n, nil
}

// applyInfraLabels copies keys from the infra node's labels (none when
// infra is nil) to the tenant node's and records them in
// InfraLabelsAnnotation. A key is taken over only when the tenant node
// lacks it, has the same value, or had it from the provider: a label the
// kubelet or an admin set stays theirs. Keys copied before that the infra
// node no longer has are removed.
func applyInfraLabels(tenant, infra *corev1.Node, keys []string) {
	var prev []string
	if v := tenant.Annotations[InfraLabelsAnnotation]; v != "" {
		prev = strings.Split(v, ",")
	}
	var copied []string
	for _, k := range keys {
		v, ok := "", false
		if infra != nil {
			v, ok = infra.Labels[k]
		}
		cur, has := tenant.Labels[k]
		switch {
		case ok && (!has || cur == v || slices.Contains(prev, k)):
			if tenant.Labels == nil {
				tenant.Labels = map[string]string{}
			}
			tenant.Labels[k] = v
			copied = append(copied, k)
		case !ok && slices.Contains(prev, k):
			delete(tenant.Labels, k)
		}
	}
	if tenant.Annotations == nil {
		tenant.Annotations = map[string]string{}
	}
	// Present even when empty: it says the labels were synced.
	tenant.Annotations[InfraLabelsAnnotation] = strings.Join(copied, ",")
}

// NodeName is the name the tenant Node of a machine registers with: the
// VM's hostname.
func NodeName(km *infrav1.KubevirtMachine) string {
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil && t.Spec.Hostname != "" {
		return t.Spec.Hostname
	}
	return vmbuilder.Hostname(km.Name)
}

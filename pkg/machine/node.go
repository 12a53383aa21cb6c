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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
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

// syncTenantNode gives the tenant Node the machine's providerID when the
// kubelet did not set one (no cloud provider in the tenant), so that Cluster
// API can match Node and Machine, and the infra node's placement labels
// (zone, region, the admin's extra keys), so tenant workloads can spread by
// infra zone; when the VM moves to another infra node, the VM instance's
// event brings the machine here again and the labels follow. The Node is
// found by its name, the VM's hostname. Until the tenant cluster is
// reachable and the Node exists, this waits for the ClusterCache's events.
// It looks every time, from the ClusterCache's cache, because a Node that
// registers again (deleted, or the tenant's control plane restored) comes
// back without either; it writes only what differs.
func (s *Service) syncTenantNode(ctx context.Context, sc *Scope, infraNode *corev1.Node) error {
	km := sc.KubevirtMachine
	if sc.Cluster == nil || km.Spec.ProviderID == nil {
		return nil
	}
	c, err := s.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(sc.Cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return nil
	}
	if err != nil {
		return err
	}
	hostname := NodeName(km)
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: hostname}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading tenant Node %s: %w", hostname, err)
	}
	before := node.DeepCopy()
	switch node.Spec.ProviderID {
	case *km.Spec.ProviderID:
	case "":
		node.Spec.ProviderID = *km.Spec.ProviderID
	default:
		// Someone else (a cloud controller manager) chose another ID; leave
		// it, Cluster API will not match this Node to the Machine.
		return fmt.Errorf("tenant Node %s has providerID %q, not %q", hostname, node.Spec.ProviderID, *km.Spec.ProviderID)
	}
	if infraNode != nil {
		applyInfraLabels(node, infraNode, s.InfraNodeLabels)
	}
	if !equality.Semantic.DeepEqual(before, node) {
		if err := c.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("updating tenant Node %s: %w", hostname, err)
		}
		ctrl.LoggerFrom(ctx).Info("Updated the tenant Node's providerID and infra placement labels", "node", hostname,
			"infraNode", infraNodeName(infraNode))
	}
	km.Status.NodeUpdated = true
	return nil
}

// applyInfraLabels copies keys from the infra node's labels to the tenant
// node's, and removes those copied before that the infra node no longer has.
func applyInfraLabels(tenant, infra *corev1.Node, keys []string) {
	var copied []string
	for _, k := range keys {
		if v, ok := infra.Labels[k]; ok {
			if tenant.Labels == nil {
				tenant.Labels = map[string]string{}
			}
			tenant.Labels[k] = v
			copied = append(copied, k)
		}
	}
	if prev := tenant.Annotations[InfraLabelsAnnotation]; prev != "" {
		for _, k := range strings.Split(prev, ",") {
			if !slices.Contains(copied, k) {
				delete(tenant.Labels, k)
			}
		}
	}
	switch {
	case len(copied) > 0:
		if tenant.Annotations == nil {
			tenant.Annotations = map[string]string{}
		}
		tenant.Annotations[InfraLabelsAnnotation] = strings.Join(copied, ",")
	default:
		delete(tenant.Annotations, InfraLabelsAnnotation)
	}
}

// infraNode reads the infra node a VM instance runs on from the infra
// cluster's cache; nil when it is not known (yet).
func (s *Service) infraNode(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Node, error) {
	if vmi == nil || vmi.Status.NodeName == "" {
		return nil, nil
	}
	n := &corev1.Node{}
	found, err := get(ctx, sc.Infra().Client, types.NamespacedName{Name: vmi.Status.NodeName}, n)
	if err != nil || !found {
		return nil, err
	}
	return n, nil
}

func infraNodeName(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Name
}

// NodeName is the name the tenant Node of a machine registers with: the
// VM's hostname.
func NodeName(km *infrav1.KubevirtMachine) string {
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil && t.Spec.Hostname != "" {
		return t.Spec.Hostname
	}
	return vmbuilder.Hostname(km.Name)
}

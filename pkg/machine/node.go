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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
)

// setNodeProviderID gives the tenant Node the machine's providerID when the
// kubelet did not set one (no cloud provider in the tenant), so that Cluster
// API can match Node and Machine. The Node is found by its name, the VM's
// hostname. Until the tenant cluster is reachable and the Node exists, this
// waits for the ClusterCache's events. It looks every time, from the
// ClusterCache's cache, because a Node that registers again (deleted, or
// the tenant's control plane restored) comes back without it.
func (s *Service) setNodeProviderID(ctx context.Context, sc *Scope) error {
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
	switch node.Spec.ProviderID {
	case *km.Spec.ProviderID:
	case "":
		before := node.DeepCopy()
		node.Spec.ProviderID = *km.Spec.ProviderID
		if err := c.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("setting providerID of tenant Node %s: %w", hostname, err)
		}
		ctrl.LoggerFrom(ctx).Info("Set providerID on the tenant Node", "node", hostname)
	default:
		// Someone else (a cloud controller manager) chose another ID; leave
		// it, Cluster API will not match this Node to the Machine.
		return fmt.Errorf("tenant Node %s has providerID %q, not %q", hostname, node.Spec.ProviderID, *km.Spec.ProviderID)
	}
	km.Status.NodeUpdated = true
	return nil
}

// NodeName is the name the tenant Node of a machine registers with: the
// VM's hostname.
func NodeName(km *infrav1.KubevirtMachine) string {
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil && t.Spec.Hostname != "" {
		return t.Spec.Hostname
	}
	return vmbuilder.Hostname(km.Name)
}

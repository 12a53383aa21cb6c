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

// Package cluster holds what the KubevirtCluster controller does once it
// has fetched its objects: keep the control-plane Service and endpoint, the
// isolation NetworkPolicies, the per-cluster network, the failure domains
// and the tenant's cloud credential on the infra cluster, report each in a
// condition, and delete it all again.
package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/controlplaneservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// Conditions lists the conditions the cluster Service sets; Ready
// summarizes them with InfraClusterAvailable.
var Conditions = []string{
	infrav1.ControlPlaneEndpointReadyCondition, infrav1.NetworkIsolationReadyCondition, infrav1.NetworksReadyCondition,
	infrav1.ControlPlaneImageReadyCondition,
}

// Scope is one KubevirtCluster with the objects around it, as the
// machine and pool services take theirs.
type Scope struct {
	KubevirtCluster *infrav1.KubevirtCluster
	// Cluster is the owner; a delete needs none.
	Cluster *clusterv1.Cluster
	// Access is the cluster's infra cluster and whether it can be used.
	Access infracluster.Access
}

// Service does the work of the KubevirtCluster controller.
type Service struct {
	// Client reaches the management cluster; Secrets are read uncached.
	Client client.Client
	// Recorder records Events on KubevirtClusters.
	Recorder events.EventRecorder
	// Isolation are the provider-wide isolation settings.
	Isolation isolation.Options
	// Networks allocates per-cluster networks.
	Networks *tenantnet.Allocator
	// TenantCloud keeps the tenant cluster's infra credential.
	TenantCloud *tenantcloud.Keeper
	// LoadBalancerFallback is how long a LoadBalancer control-plane
	// Service may wait for an address before the endpoint falls back to
	// its cluster IP or a node port (controlplaneservice.FallbackEndpoint); 0 waits
	// forever.
	LoadBalancerFallback time.Duration
	// Now is the clock of that wait; nil means time.Now.
	Now func() time.Time
}

// LoadBalancerUnavailableReason is the Event reason of an endpoint that
// fell back from a load balancer that gave no address.
const LoadBalancerUnavailableReason = "LoadBalancerUnavailable"

// Reconcile brings the cluster's objects on infra to their desired state,
// reports each in its condition, and marks the cluster provisioned once all
// of them are in place. Problems the user must fix are reported in
// conditions only; API errors are also returned, for a retry. Without a
// reachable infra cluster it does nothing and returns the access outcome.
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	kc, cluster, access := sc.KubevirtCluster, sc.Cluster, sc.Access
	if !access.Reachable() {
		// Services and NetworkPolicies are core objects: a reachable infra
		// cluster without KubeVirt can still have them.
		return access.Outcome, nil
	}
	infra := access.Infra
	var ref *metav1.OwnerReference
	if !infra.External {
		ref = metav1.NewControllerRef(kc, infrav1.GroupVersion.WithKind("KubevirtCluster"))
	}
	var errs []error
	var nodes []corev1.Node
	if len(kc.Spec.FailureDomains) == 0 || controlplaneservice.NeedsNodeAddress(kc) || infra.External && s.mayFallBack(kc) {
		// Only failure-domain discovery and an endpoint on a node port
		// without a host need the nodes.
		list := &corev1.NodeList{}
		// Bounded: with a kubeconfig that may not watch nodes, the cache
		// would wait forever.
		listCtx, cancel := context.WithTimeout(ctx, nodeListTimeout)
		defer cancel()
		if err := infra.Client.List(listCtx, list); err != nil {
			errs = append(errs, fmt.Errorf("listing infra nodes for failure domains or a node-port address (set spec.failureDomains and controlPlaneEndpoint.host instead): %w", err))
		}
		nodes = list.Items
	}
	kc.Status.FailureDomains = failuredomains.Status(kc.Spec.FailureDomains, nodes)

	steps := []struct {
		condition string
		run       func(context.Context, *infrav1.KubevirtCluster, *clusterv1.Cluster, *infracluster.Infra, *metav1.OwnerReference) (outcome.Outcome, error)
	}{
		{infrav1.NetworkIsolationReadyCondition, s.reconcileIsolation},
		{infrav1.NetworksReadyCondition, s.reconcileNetworks},
		{infrav1.ControlPlaneEndpointReadyCondition, func(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (outcome.Outcome, error) {
			return s.reconcileEndpoint(ctx, kc, cluster, infra, ref, nodes)
		}},
	}
	outcomes := make([]outcome.Outcome, 0, len(steps))
	for _, step := range steps {
		o, err := step.run(ctx, kc, cluster, infra, ref)
		// Each step's progress is in its condition; Events say when one
		// fails and when the cluster is provisioned.
		outcome.RecordWarning(s.Recorder, kc, step.condition, o)
		outcomes = append(outcomes, o)
		errs = append(errs, err)
	}
	if !ptr.Deref(kc.Status.Initialization.Provisioned, false) {
		// Provisioned is never taken back: the wait is for the first
		// control-plane machines only.
		o, err := s.reconcileControlPlaneImage(ctx, kc, cluster, infra)
		outcome.RecordWarning(s.Recorder, kc, infrav1.ControlPlaneImageReadyCondition, o)
		outcomes = append(outcomes, o)
		errs = append(errs, err)
	} else if !conditions.Has(kc, infrav1.ControlPlaneImageReadyCondition) {
		outcome.Set(kc, infrav1.ControlPlaneImageReadyCondition, outcome.Ready(infrav1.NotAwaitedReason,
			"the cluster was provisioned before the provider awaited its control plane's golden image"))
	}
	all := outcome.Merge(outcomes...)
	// The credential waits for the tenant's control plane, which waits for
	// the provisioned infrastructure: it has its own condition, outside
	// Ready and provisioning.
	tenantCloud, err := s.TenantCloud.Reconcile(ctx, kc, cluster.Name, infra, ref)
	outcome.RecordWarning(s.Recorder, kc, infrav1.TenantCloudReadyCondition, tenantCloud)
	errs = append(errs, err)
	// VMs start only once isolated and networked: CAPI creates no bootstrap
	// data, so no VM, before the cluster is provisioned.
	if all.IsDone() {
		if !ptr.Deref(kc.Status.Initialization.Provisioned, false) {
			s.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, "Provisioned", "ProvisionCluster",
				"the control plane endpoint, networks and network isolation are in place on the %s", infra.Description())
		}
		kc.Status.Ready = true
		kc.Status.Initialization.Provisioned = ptr.To(true)
		// The wait is over: the control plane's template, and soon its
		// machines, keep the golden volume in use; a name kept here would
		// keep it after a rollout to a new image, as nothing wakes a
		// provisioned cluster when its control plane comes up.
		kc.Status.GoldenImage = nil
	}
	// An external infra cluster without KubeVirt or CDI has no watch yet
	// that would announce them.
	all.RequeueAfter = outcome.Sooner(outcome.Sooner(all.RequeueAfter, access.Outcome.RequeueAfter), tenantCloud.RequeueAfter)
	return all, kerrors.NewAggregate(errs)
}

const nodeListTimeout = 15 * time.Second

// NodeAddressRecheck is how often a NodePort endpoint without a host looks
// again for a Ready infra node to take the address of.
const NodeAddressRecheck = 30 * time.Second

// NetworkRecheck is how often a cluster waiting for its network template or
// a free VLAN looks again, besides the events that wake it: templates and
// other clusters' networks may live where no watch reaches (another
// namespace of an external infra cluster).
const NetworkRecheck = time.Minute

func (s *Service) reconcileIsolation(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (outcome.Outcome, error) {
	opts := s.Isolation
	infraAPI, err := tenantcloud.APIEndpoints(ctx, infra, kc.Spec.TenantCloud)
	if err != nil {
		return outcome.Fail(infrav1.NetworkPolicyFailedReason, err.Error()), err
	}
	opts.InfraAPI = infraAPI
	if err := isolation.Ensure(ctx, infra.Client, kc, cluster.Name, infra.Namespace, ref, opts); err != nil {
		return outcome.Fail(infrav1.NetworkPolicyFailedReason, err.Error()), err
	}
	if !isolation.Enabled(kc) {
		return outcome.Ready(infrav1.DisabledReason,
			fmt.Sprintf("isolation is disabled; %d custom NetworkPolicies kept in %s", len(kc.Spec.CustomNetworkPolicies), infra.Namespace)), nil
	}
	return outcome.Ready(infrav1.AppliedReason,
		fmt.Sprintf("the cluster's VMs are isolated by NetworkPolicies %s and %s in %s (and %d custom)",
			isolation.PolicyName(kc), isolation.APIServerName(kc), infra.Namespace, len(kc.Spec.CustomNetworkPolicies))), nil
}

func (s *Service) reconcileNetworks(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (outcome.Outcome, error) {
	pc := kc.Spec.Network.PerCluster
	if pc == nil || kc.Status.Network.PerCluster != "" && kc.Status.Network.PerCluster != infra.Namespace+"/"+tenantnet.Name(kc) {
		// Not wanted any more, or renamed: the old network goes.
		if kc.Status.Network.PerCluster != "" {
			gone, err := tenantnet.Delete(ctx, infra.Client, kc, kc.Status.Network.PerCluster)
			if err != nil || !gone {
				return outcome.Fail(infrav1.NetworkFailedReason,
					fmt.Sprintf("deleting NetworkAttachmentDefinition %s: %v", kc.Status.Network.PerCluster, err)), err
			}
			kc.Status.Network = infrav1.ClusterNetworkStatus{}
		}
		if pc == nil {
			return outcome.Ready(infrav1.CreatedReason, "the cluster has no per-cluster network"), nil
		}
	}
	res, err := s.Networks.Ensure(ctx, infra.Client, infra.APIReader, kc, cluster.Name, infra.Namespace, ref)
	switch {
	case tenantnet.IsTemplateError(err):
		return outcome.Fail(infrav1.TemplateInvalidReason, err.Error()).After(NetworkRecheck), nil
	case tenantnet.IsVLANError(err):
		return outcome.Fail(infrav1.VLANUnavailableReason, err.Error()).After(NetworkRecheck), nil
	case err != nil:
		return outcome.Fail(infrav1.NetworkFailedReason, err.Error()), err
	}
	kc.Status.Network = infrav1.ClusterNetworkStatus{PerCluster: res.NAD, VLANID: res.VLAN}
	return outcome.Ready(infrav1.CreatedReason, fmt.Sprintf("NetworkAttachmentDefinition %s carries VLAN %d", res.NAD, res.VLAN)), nil
}

// reconcileEndpoint keeps the control-plane Service and fills in the
// endpoint parts the user left empty.
func (s *Service) reconcileEndpoint(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference, nodes []corev1.Node) (outcome.Outcome, error) {
	// The community provider's Service is adopted only in the
	// KubevirtCluster's own namespace on the management cluster, where
	// no other cluster of its name can be: its selector, kept, names the
	// cluster alone (docs/migrating-from-capk.md).
	mayAdopt := !infra.External && controlplaneservice.Desired(kc, cluster.Name, infra.Namespace).Namespace == kc.Namespace
	svc, err := controlplaneservice.Ensure(ctx, infra.Client, kc, cluster.Name, infra.Namespace, ref, mayAdopt)
	if err != nil {
		return outcome.Fail(infrav1.ServiceFailedReason, err.Error()), err
	}
	picked := controlplaneservice.NeedsNodeAddress(kc)
	ep, ok, wait := controlplaneservice.Endpoint(kc, svc, nodes)
	fellBack := ""
	if !ok && s.mayFallBack(kc) {
		fb := controlplaneservice.LoadBalancerFallback{After: s.LoadBalancerFallback, Local: !infra.External, Now: s.now()}
		fbEndpoint, fbOK, recheck, why := controlplaneservice.FallbackEndpoint(kc, svc, nodes, fb)
		switch {
		case fbOK:
			ep, ok, fellBack = fbEndpoint, true, why
		case recheck > 0:
			return outcome.Wait(infrav1.WaitingForEndpointReason, fmt.Sprintf(
				"%s; without one in %s more, the endpoint falls back to the Service's %s", wait, recheck.Round(time.Second), fallbackTarget(infra))).After(recheck), nil
		case why != "":
			wait += "; and it cannot fall back: " + why
		}
	}
	if !ok {
		if picked {
			// A node turning Ready or being uncordoned is no label change,
			// which is all the Node watch passes on.
			return outcome.Wait(infrav1.WaitingForEndpointReason, wait).After(NodeAddressRecheck), nil
		}
		return outcome.Wait(infrav1.WaitingForEndpointReason, wait), nil
	}
	// Only the parts the user left empty are filled; a set endpoint is never
	// overwritten.
	if kc.Spec.ControlPlaneEndpoint.Host == "" {
		kc.Spec.ControlPlaneEndpoint.Host = ep.Host
	}
	if kc.Spec.ControlPlaneEndpoint.Port == 0 {
		kc.Spec.ControlPlaneEndpoint.Port = ep.Port
	}
	msg := fmt.Sprintf("the control plane is reached at %s:%d", kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port)
	if picked {
		msg += ", an infra node's address picked as controlPlaneEndpoint.host was not set"
	}
	if fellBack != "" {
		// Once: the endpoint is set now, and never changes.
		s.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, LoadBalancerUnavailableReason, "FallBack", "%s", fellBack)
		msg += "; " + fellBack
	}
	return outcome.Ready(infrav1.EndpointReadyReason, msg), nil
}

// mayFallBack says whether the endpoint is a LoadBalancer Service's that
// may fall back (controlplaneservice.FallbackEndpoint) and is not set yet.
func (s *Service) mayFallBack(kc *infrav1.KubevirtCluster) bool {
	return s.LoadBalancerFallback > 0 && kc.Spec.ControlPlaneEndpoint.Host == "" &&
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// fallbackTarget names what the endpoint falls back to on infra.
func fallbackTarget(infra *infracluster.Infra) string {
	if infra.External {
		return "node port on an infra node's address"
	}
	return "cluster IP"
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Package cluster holds what the KubevirtCluster controller does once it
// has fetched its objects: keep the control-plane Service and endpoint, the
// isolation NetworkPolicies, the per-cluster network and the failure domains
// on the infra cluster, report each in a condition, and delete it all again.
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
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cpservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantnet"
)

// Conditions lists the conditions the cluster Service sets; Ready
// summarizes them with InfraClusterAvailable.
var Conditions = []string{
	infrav1.ControlPlaneEndpointReadyCondition, infrav1.NetworkIsolationReadyCondition, infrav1.NetworksReadyCondition,
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
}

// Reconcile brings the cluster's objects on infra to their desired state
// and marks the cluster provisioned once all of them are in place. Problems
// the user must fix are reported in conditions only; API errors are also
// returned, for a retry.
func (s *Service) Reconcile(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra) (time.Duration, error) {
	var ref *metav1.OwnerReference
	if !infra.External {
		ref = metav1.NewControllerRef(kc, infrav1.GroupVersion.WithKind("KubevirtCluster"))
	}
	var errs []error
	var nodes []corev1.Node
	if len(kc.Spec.FailureDomains) == 0 {
		// Only discovery needs the nodes.
		list := &corev1.NodeList{}
		// Bounded: with a kubeconfig that may not watch nodes, the cache
		// would wait forever.
		listCtx, cancel := context.WithTimeout(ctx, nodeListTimeout)
		defer cancel()
		if err := infra.Client.List(listCtx, list); err != nil {
			errs = append(errs, fmt.Errorf("listing infra nodes to discover failure domains (list them in spec.failureDomains instead): %w", err))
		}
		nodes = list.Items
	}
	kc.Status.FailureDomains = failuredomains.Status(kc.Spec.FailureDomains, nodes)

	isolated, err := s.reconcileIsolation(ctx, kc, cluster, infra, ref)
	errs = append(errs, err)
	networked, err := s.reconcileNetworks(ctx, kc, cluster, infra, ref)
	errs = append(errs, err)
	endpoint, err := s.reconcileEndpoint(ctx, kc, cluster, infra, ref)
	errs = append(errs, err)
	// VMs start only once isolated and networked: CAPI creates no bootstrap
	// data, so no VM, before the cluster is provisioned.
	if isolated && networked && endpoint {
		kc.Status.Ready = true
		kc.Status.Initialization.Provisioned = ptr.To(true)
	}
	var recheck time.Duration
	if c := conditions.Get(kc, infrav1.NetworksReadyCondition); c != nil &&
		(c.Reason == infrav1.NetworkTemplateInvalidReason || c.Reason == infrav1.VLANUnavailableReason) {
		// Templates and other clusters' networks may live where no watch
		// reaches (another namespace of an external infra cluster).
		recheck = NetworkRecheck
	}
	return recheck, kerrors.NewAggregate(errs)
}

const nodeListTimeout = 15 * time.Second

// NetworkRecheck is how often a cluster waiting for its network template or
// a free VLAN looks again, besides the events that wake it.
const NetworkRecheck = time.Minute

func (s *Service) reconcileIsolation(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (bool, error) {
	if err := isolation.Ensure(ctx, infra.Client, kc, cluster.Name, infra.Namespace, ref, s.Isolation); err != nil {
		s.setCondition(kc, infrav1.NetworkIsolationReadyCondition, false, infrav1.NetworkPolicyFailedReason, err.Error())
		return false, err
	}
	if !isolation.Enabled(kc) {
		s.setCondition(kc, infrav1.NetworkIsolationReadyCondition, true, infrav1.IsolationDisabledReason,
			fmt.Sprintf("isolation is disabled; %d custom NetworkPolicies kept in %s", len(kc.Spec.CustomNetworkPolicies), infra.Namespace))
		return true, nil
	}
	s.setCondition(kc, infrav1.NetworkIsolationReadyCondition, true, infrav1.IsolationAppliedReason,
		fmt.Sprintf("the cluster's VMs are isolated by NetworkPolicies %s and %s in %s (and %d custom)",
			isolation.PolicyName(kc), isolation.APIServerName(kc), infra.Namespace, len(kc.Spec.CustomNetworkPolicies)))
	return true, nil
}

func (s *Service) reconcileNetworks(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (bool, error) {
	pc := kc.Spec.Network.PerCluster
	if pc == nil || kc.Status.Network.PerCluster != "" && kc.Status.Network.PerCluster != infra.Namespace+"/"+tenantnet.Name(kc) {
		// Not wanted any more, or renamed: the old network goes.
		if kc.Status.Network.PerCluster != "" {
			gone, err := tenantnet.Delete(ctx, infra.Client, kc, kc.Status.Network.PerCluster)
			if err != nil || !gone {
				s.setCondition(kc, infrav1.NetworksReadyCondition, false, infrav1.NetworkFailedReason,
					fmt.Sprintf("deleting NetworkAttachmentDefinition %s: %v", kc.Status.Network.PerCluster, err))
				return false, err
			}
			kc.Status.Network = infrav1.ClusterNetworkStatus{}
		}
		if pc == nil {
			s.setCondition(kc, infrav1.NetworksReadyCondition, true, infrav1.NetworksCreatedReason, "the cluster has no per-cluster network")
			return true, nil
		}
	}
	res, err := s.Networks.Ensure(ctx, infra.Client, infra.APIReader, kc, cluster.Name, infra.Namespace, ref)
	switch {
	case tenantnet.IsTemplateError(err):
		s.setCondition(kc, infrav1.NetworksReadyCondition, false, infrav1.NetworkTemplateInvalidReason, err.Error())
		return false, nil
	case tenantnet.IsVLANError(err):
		s.setCondition(kc, infrav1.NetworksReadyCondition, false, infrav1.VLANUnavailableReason, err.Error())
		return false, nil
	case err != nil:
		s.setCondition(kc, infrav1.NetworksReadyCondition, false, infrav1.NetworkFailedReason, err.Error())
		return false, err
	}
	kc.Status.Network = infrav1.ClusterNetworkStatus{PerCluster: res.NAD, VLANID: res.VLAN}
	s.setCondition(kc, infrav1.NetworksReadyCondition, true, infrav1.NetworksCreatedReason,
		fmt.Sprintf("NetworkAttachmentDefinition %s carries VLAN %d", res.NAD, res.VLAN))
	return true, nil
}

// reconcileEndpoint keeps the control-plane Service and fills in the
// endpoint parts the user left empty.
func (s *Service) reconcileEndpoint(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra, ref *metav1.OwnerReference) (bool, error) {
	svc, err := cpservice.Ensure(ctx, infra.Client, kc, cluster.Name, infra.Namespace, ref)
	if err != nil {
		s.setCondition(kc, infrav1.ControlPlaneEndpointReadyCondition, false, infrav1.ServiceFailedReason, err.Error())
		return false, err
	}
	ep, ok, wait := cpservice.Endpoint(kc, svc)
	if !ok {
		s.setCondition(kc, infrav1.ControlPlaneEndpointReadyCondition, false, infrav1.WaitingForEndpointReason, wait)
		return false, nil
	}
	// Only the parts the user left empty are filled; a set endpoint is never
	// overwritten.
	if kc.Spec.ControlPlaneEndpoint.Host == "" {
		kc.Spec.ControlPlaneEndpoint.Host = ep.Host
	}
	if kc.Spec.ControlPlaneEndpoint.Port == 0 {
		kc.Spec.ControlPlaneEndpoint.Port = ep.Port
	}
	s.setCondition(kc, infrav1.ControlPlaneEndpointReadyCondition, true, infrav1.EndpointReadyReason,
		fmt.Sprintf("the control plane is reached at %s:%d", kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port))
	return true, nil
}

// setCondition sets a condition and records an Event when its reason
// changes: a warning for a False condition that is no wait.
func (s *Service) setCondition(kc *infrav1.KubevirtCluster, condType string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	if prev := conditions.Get(kc, condType); prev == nil || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if !ok && reason != infrav1.WaitingForEndpointReason {
			eventType = corev1.EventTypeWarning
		}
		s.Recorder.Eventf(kc, nil, eventType, reason, "Reconcile"+condType, "%s", message)
	}
	conditions.Set(kc, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
}

package world

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// vmJoiner makes the simulated guest of a provider-built VM join its
// tenant cluster, finding the cluster and Machine by the labels the provider
// puts on the VM. Like a kubelet without a cloud provider, it registers the
// Node without a providerID: setting it is the provider's job.
type vmJoiner struct {
	mgmt client.Reader
	// infra reads the infra cluster, where control-plane Services are.
	infra     client.Reader
	workloads *Workloads
}

var _ sim.Joiner = &vmJoiner{}

// Join implements sim.Joiner.
func (j *vmJoiner) Join(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, _ sim.Bootstrap) error {
	ns, cluster := vmi.Labels[infrav1.KubevirtMachineNamespaceLabel], vmi.Labels[infrav1.ClusterNameLabel]
	if ns == "" || cluster == "" {
		// Not a tenant machine: it boots and joins nothing.
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: cluster}
	if !j.workloads.Has(key) {
		if err := j.workloads.ensureBehindLoadBalancer(ctx, j.infra, vmi.Namespace, key); err != nil {
			return err
		}
	}
	if !j.workloads.Has(key) {
		return nil
	}
	version := ""
	if name := vmi.Labels[infrav1.MachineLabel]; name != "" {
		m := &clusterv1.Machine{}
		if err := j.mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m); err == nil {
			version = m.Spec.Version
		}
	}
	node := vmi.Spec.Hostname
	if node == "" {
		node = vmi.Name
	}
	if err := j.workloads.Join(ctx, Member{Cluster: key, NodeName: node, Version: version,
		ControlPlane: vmi.Labels[infrav1.RoleLabel] == infrav1.RoleControlPlane}); err != nil {
		return fmt.Errorf("joining %s to %s: %w", node, key, err)
	}
	return nil
}

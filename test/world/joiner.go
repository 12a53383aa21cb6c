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
// tenant cluster. Like a kubelet without a cloud provider, it registers the
// Node without a providerID: setting it is the provider's job.
type vmJoiner struct {
	mgmt client.Reader
	// infra reads the infra cluster, where control-plane Services are.
	infra     client.Reader
	workloads *Workloads
}

var (
	_ sim.Joiner       = &vmJoiner{}
	_ sim.GuestStopper = &vmJoiner{}
)

// Join implements sim.Joiner.
func (j *vmJoiner) Join(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data sim.Bootstrap) error {
	member, ok, err := j.memberOf(ctx, vmi)
	if err != nil || !ok {
		// Not a tenant machine: it boots and joins nothing.
		return err
	}
	// kubeadm checks its kubelet against the version Cluster API asked
	// for; the Node then reports the kubelet the guest really runs.
	if err := sim.CheckVersionSkew(data.Kubelet, member.Version, data.Init); err != nil {
		return err
	}
	if data.Kubelet != "" {
		member.Version = data.Kubelet
	}
	if member.Address, err = sim.NodeIP(&data, vmi); err != nil {
		return err
	}
	if !j.workloads.Has(member.Cluster) {
		if err := j.workloads.ensureBehindLoadBalancer(ctx, j.infra, vmi.Namespace, member.Cluster); err != nil {
			return err
		}
	}
	if !j.workloads.Has(member.Cluster) {
		return nil
	}
	if err := j.workloads.Join(ctx, member); err != nil {
		return fmt.Errorf("joining %s to %s: %w", member.NodeName, member.Cluster, err)
	}
	return nil
}

// GuestStopped implements sim.GuestStopper: the tenant Node of a guest that
// stopped without leaving turns NotReady.
func (j *vmJoiner) GuestStopped(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	member, ok, err := j.memberOf(ctx, vmi)
	if err != nil || !ok || !j.workloads.Has(member.Cluster) {
		return err
	}
	return j.workloads.NodeLost(ctx, member.Cluster, member.NodeName)
}

// memberOf finds the tenant cluster and Machine of a VMI: by the labels
// this provider puts on its VMs or, for another provider's VMs, by the
// Machine whose infrastructure object has the VM's name in its namespace.
func (j *vmJoiner) memberOf(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (Member, bool, error) {
	node := vmi.Spec.Hostname
	if node == "" {
		node = vmi.Name
	}
	ns, cluster := vmi.Labels[infrav1.KubevirtMachineNamespaceLabel], vmi.Labels[infrav1.ClusterNameLabel]
	if ns != "" && cluster != "" {
		m := Member{Cluster: types.NamespacedName{Namespace: ns, Name: cluster}, NodeName: node,
			ControlPlane: vmi.Labels[infrav1.RoleLabel] == infrav1.RoleControlPlane}
		if name := vmi.Labels[infrav1.MachineLabel]; name != "" {
			machine := &clusterv1.Machine{}
			if err := j.mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, machine); err == nil {
				m.Version = machine.Spec.Version
			}
		}
		return m, true, nil
	}
	machines := &clusterv1.MachineList{}
	if err := j.mgmt.List(ctx, machines, client.InNamespace(vmi.Namespace)); err != nil {
		return Member{}, false, err
	}
	for _, machine := range machines.Items {
		if machine.Spec.InfrastructureRef.Name == vmi.Name && machine.Spec.ClusterName != "" {
			_, controlPlane := machine.Labels[clusterv1.MachineControlPlaneLabel]
			return Member{Cluster: types.NamespacedName{Namespace: machine.Namespace, Name: machine.Spec.ClusterName},
				NodeName: node, Version: machine.Spec.Version, ControlPlane: controlPlane}, true, nil
		}
	}
	return Member{}, false, nil
}

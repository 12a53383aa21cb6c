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
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
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
	// network judges the guest's connection to its control plane.
	network *sim.Simulator
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
	if !data.Init {
		// kubeadm join first connects to the control plane.
		if err := j.reachControlPlane(ctx, vmi, member.Cluster); err != nil {
			return err
		}
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
	member.ExternalCloudProvider = sim.ExternalCloudProvider(&data)
	if member.NodeIPFlag, err = sim.NodeIPFlag(&data, vmi); err != nil {
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

// reachControlPlane has a joining guest connect to its cluster's
// control-plane Service, whose address the CNI translates to one of the
// control-plane VMs before policies apply: the join goes ahead when the
// NetworkPolicies let the guest reach any of them, as kubeadm's retries
// would find one. A cluster with no control-plane VM running yet (tests of
// workers alone) is not checked, nor a guest without a pod network.
func (j *vmJoiner) reachControlPlane(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, cluster types.NamespacedName) error {
	svc, backends, err := j.controlPlaneBackends(ctx, vmi, cluster)
	if err != nil || len(backends) == 0 {
		return err
	}
	from, err := j.network.GuestEndpoint(ctx, vmi)
	if err != nil || from.IP != "" {
		// A VM without a pod network reaches its control plane over its
		// other network, where no policy applies.
		return err
	}
	port := svc.Spec.Ports[0].TargetPort.IntVal
	if port == 0 {
		port = svc.Spec.Ports[0].Port
	}
	for _, backend := range backends {
		ok, err := j.network.Reachable(ctx, from, sim.PodEndpoint(backend), "TCP", port)
		if err != nil || ok {
			return err
		}
	}
	return &sim.UnreachableError{From: from.String(),
		To: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))}
}

// controlPlaneBackends finds the tenant's control-plane Service in the VM's
// namespace and the running control-plane VMs' launcher pods it selects,
// other than the guest's own.
func (j *vmJoiner) controlPlaneBackends(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, cluster types.NamespacedName) (*corev1.Service, []types.NamespacedName, error) {
	services := &corev1.ServiceList{}
	if err := j.infra.List(ctx, services, client.InNamespace(vmi.Namespace), client.MatchingLabels{infrav1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, nil, err
	}
	for i := range services.Items {
		svc := &services.Items[i]
		if tenant, ok := tenantOf(svc); !ok || tenant != cluster || len(svc.Spec.Ports) == 0 {
			continue
		}
		pods := &corev1.PodList{}
		if err := j.infra.List(ctx, pods, client.InNamespace(svc.Namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
			return nil, nil, err
		}
		var backends []types.NamespacedName
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp.IsZero() &&
				pod.Labels[kubevirtv1.CreatedByLabel] != string(vmi.UID) {
				backends = append(backends, client.ObjectKeyFromObject(&pod))
			}
		}
		return svc, backends, nil
	}
	return nil, nil, nil
}

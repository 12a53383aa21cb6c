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

package sim

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CPUManagerLabel marks the nodes that can give VMs dedicated CPUs: KubeVirt
// 1.7, which the world runs, sets cpumanager=true (1.8 renamed it
// kubevirt.io/cpumanager).
const CPUManagerLabel = kubevirtv1.DeprecatedCPUManager

// HostCPUModel is the CPU model every simulated node's host has.
const HostCPUModel = "Skylake-Server-IBRS"

// Bridges are the Linux bridges every simulated node has.
var Bridges = []string{"br0", "br-storage", "br-tenants"}

const hugepages2Mi = corev1.ResourceName(corev1.ResourceHugePagesPrefix + "2Mi")

// NodeSpec describes one simulated infra node.
type NodeSpec struct {
	Name   string
	Zone   string
	CPU    string
	Memory string
	Labels map[string]string
	Taints []corev1.Taint
	// Hugepages2Mi is the node's hugepages-2Mi capacity, if any.
	Hugepages2Mi string
	// Devices are what the node's device plugins advertise beyond
	// virt-handler's own: a GPU model's or a host device's resource name
	// (as KubeVirt's permittedHostDevices names it) and how many the node
	// has. The scheduler fits launcher pods to them and the simulated
	// kubelet admits a pod only while enough are free (see devicesShort).
	Devices map[corev1.ResourceName]int64
	// CPUManager labels the node cpumanager=true, as virt-handler does on
	// nodes whose kubelet runs the static CPU manager policy: VMs with
	// dedicated CPUs are scheduled only there.
	CPUManager bool
	// Address is the node's InternalIP; empty gives 172.30.0.x, which
	// nothing in the world serves. A loopback address (the world's infra
	// nodes) serves the node ports of tenant control-plane Services.
	Address string
}

// CreateNodes creates infra Nodes with capacity, zone and hostname labels,
// what virt-handler would add (the schedulable and machine-type labels,
// its device plugins' resources) and a Ready condition. There is no kubelet
// and no virt-handler heartbeat: the simulator acts for both on the pods
// and VMIs bound to these nodes, and virt-controller's node controller
// treats a node without a heartbeat annotation as alive.
func CreateNodes(ctx context.Context, c client.Client, specs ...NodeSpec) error {
	for i, spec := range specs {
		labels := map[string]string{
			corev1.LabelHostname:     spec.Name,
			corev1.LabelTopologyZone: spec.Zone,
			corev1.LabelArchStable:   "amd64",
			corev1.LabelOSStable:     "linux",
			// virt-handler's heartbeat keeps this label, and its node
			// labeller the machine types the host's QEMU supports; every
			// launcher pod's node selector asks for both.
			kubevirtv1.NodeSchedulable:                   "true",
			kubevirtv1.SupportedMachineTypeLabel + "q35": "true",
			// The node labeller's host CPU model: virt-controller pins a
			// host-model VM's migration target to a node that supports
			// the source's model (docs/kubevirt-behaviour.md#live-migration).
			kubevirtv1.HostModelCPULabel + HostCPUModel:              "true",
			kubevirtv1.SupportedHostModelMigrationCPU + HostCPUModel: "true",
		}
		if spec.CPUManager {
			labels[CPUManagerLabel] = "true"
		}
		for k, v := range spec.Labels {
			labels[k] = v
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: spec.Taints},
		}
		if err := c.Create(ctx, node); apierrors.IsAlreadyExists(err) {
			// The world restarted from kept state: the node is there.
			continue
		} else if err != nil {
			return fmt.Errorf("creating node %s: %w", spec.Name, err)
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(spec.CPU),
			corev1.ResourceMemory: resource.MustParse(spec.Memory),
			corev1.ResourcePods:   resource.MustParse("250"),
		}
		capacity[corev1.ResourceEphemeralStorage] = resource.MustParse("200Gi")
		// virt-handler's device plugins advertise these; launcher pods
		// request them.
		for _, device := range []corev1.ResourceName{"devices.kubevirt.io/kvm", "devices.kubevirt.io/tun", "devices.kubevirt.io/vhost-net"} {
			capacity[device] = resource.MustParse("1k")
		}
		// bridge-marker advertises each Linux bridge of the node; KubeVirt
		// requests the one a network's resourceName annotation names.
		for _, bridge := range Bridges {
			capacity[corev1.ResourceName("bridge.network/"+bridge)] = resource.MustParse("1k")
		}
		if spec.Hugepages2Mi != "" {
			capacity[hugepages2Mi] = resource.MustParse(spec.Hugepages2Mi)
		}
		for device, n := range spec.Devices {
			capacity[device] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		now := metav1.Now()
		node.Status = corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated node", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cmp.Or(spec.Address, fmt.Sprintf("172.30.0.%d", i+10))},
				{Type: corev1.NodeHostName, Address: spec.Name},
			},
		}
		if err := c.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("setting status of node %s: %w", spec.Name, err)
		}
		// The API server taints new nodes not-ready; the node lifecycle
		// controller, which the test world does not run because there is no
		// kubelet heartbeat, would lift it once the node is Ready.
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				taints = append(taints, t)
			}
		}
		taints = append(taints, spec.Taints...)
		node.Spec.Taints = dedupTaints(taints)
		if err := c.Update(ctx, node); err != nil {
			return fmt.Errorf("lifting the not-ready taint of node %s: %w", spec.Name, err)
		}
	}
	return nil
}

// InternalIP is a node's first internal IP, empty if it has none.
func InternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func dedupTaints(taints []corev1.Taint) []corev1.Taint {
	seen := map[string]bool{}
	var out []corev1.Taint
	for _, t := range taints {
		key := t.Key + "/" + string(t.Effect)
		if !seen[key] {
			out = append(out, t)
		}
		seen[key] = true
	}
	return out
}

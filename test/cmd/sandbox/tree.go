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

package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// readyOf reads an object's Ready condition as "Ready" or "NotReady (Reason)".
func readyOf(obj conditions.Getter) string {
	return conditionOf(obj, clusterv1.ReadyCondition, "Ready")
}

// conditionOf reads a condition as word or "Not<word> (Reason)".
func conditionOf(obj conditions.Getter, condType, word string) string {
	c := conditions.Get(obj, condType)
	switch {
	case c == nil:
		return "-"
	case c.Status == metav1.ConditionTrue:
		return word
	default:
		return "Not" + word + " (" + c.Reason + ")"
	}
}

// tree renders the cluster like `clusterctl describe cluster`: the Cluster,
// its infrastructure, control plane and workers, each machine with its VM
// and disks, and the golden images. done reports whether the control plane
// and the workers are all ready with Nodes.
func tree(ctx context.Context, c client.Client, ns, name string) (out string, done bool, err error) {
	var b strings.Builder
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
		return "", false, err
	}
	fmt.Fprintf(&b, "Cluster %s/%s  %s\n", ns, name, conditionOf(cluster, clusterv1.AvailableCondition, "Available"))
	kc := &infrav1.KubevirtCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kc); err == nil {
		fmt.Fprintf(&b, "├─ KubevirtCluster %s  %s  endpoint %s:%d\n", kc.Name, readyOf(kc),
			kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port)
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return "", false, err
	}
	dvs := &cdiv1.DataVolumeList{}
	if err := c.List(ctx, dvs, client.InNamespace(ns)); err != nil {
		return "", false, err
	}
	sort.Slice(machines.Items, func(i, j int) bool { return machines.Items[i].Name < machines.Items[j].Name })
	kcp := &controlplanev1.KubeadmControlPlane{}
	cpReady, cpWant := int32(0), int32(0)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, kcp); err == nil {
		cpReady, cpWant = ptr.Deref(kcp.Status.ReadyReplicas, 0), ptr.Deref(kcp.Spec.Replicas, 0)
		fmt.Fprintf(&b, "├─ KubeadmControlPlane %s  %d/%d ready\n", kcp.Name, cpReady, cpWant)
		writeMachines(ctx, c, &b, "│  ", machines.Items, dvs.Items, func(m clusterv1.Machine) bool { return hasKey(m.Labels, clusterv1.MachineControlPlaneLabel) })
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return "", false, err
	}
	workersReady := len(mds.Items) > 0
	for _, md := range mds.Items {
		ready, want := ptr.Deref(md.Status.ReadyReplicas, 0), ptr.Deref(md.Spec.Replicas, 0)
		workersReady = workersReady && ready == want
		fmt.Fprintf(&b, "├─ MachineDeployment %s  %d/%d ready\n", md.Name, ready, want)
		writeMachines(ctx, c, &b, "│  ", machines.Items, dvs.Items, func(m clusterv1.Machine) bool { return m.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name })
	}
	for _, dv := range dvs.Items {
		if dv.Labels[goldenplan.Label] != "" {
			fmt.Fprintf(&b, "└─ golden image %s  %s %s\n", dv.Name, dv.Status.Phase, dv.Status.Progress)
		}
	}
	nodes := 0
	for _, m := range machines.Items {
		if m.Status.NodeRef.IsDefined() {
			nodes++
		}
	}
	done = cpWant > 0 && cpReady == cpWant && workersReady && nodes == len(machines.Items)
	return b.String(), done, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// writeMachines writes the machines that match, each with its VM and disks.
func writeMachines(ctx context.Context, c client.Client, b *strings.Builder, indent string, machines []clusterv1.Machine, dvs []cdiv1.DataVolume, match func(clusterv1.Machine) bool) {
	for _, m := range machines {
		if !match(m) {
			continue
		}
		node := "no Node yet"
		if m.Status.NodeRef.IsDefined() {
			node = "Node " + m.Status.NodeRef.Name
		}
		fmt.Fprintf(b, "%s├─ Machine %s  %s  %s\n", indent, m.Name, m.Status.Phase, node)
		km := &infrav1.KubevirtMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, km); err != nil {
			continue
		}
		vm := "no VM yet"
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: km.Name}, vmi); err == nil {
			vm = "VMI " + string(vmi.Status.Phase)
			if vmi.Status.NodeName != "" {
				vm += " on " + vmi.Status.NodeName
			}
		}
		fmt.Fprintf(b, "%s│  └─ KubevirtMachine %s  %s  %s\n", indent, km.Name, readyOf(km), vm)
		for _, dv := range dvs {
			if strings.HasPrefix(dv.Name, km.Name+"-") {
				fmt.Fprintf(b, "%s│     └─ disk %s  %s\n", indent, dv.Name, dv.Status.Phase)
			}
		}
	}
}

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

// Package failuredomains turns a KubevirtCluster's failure domains, given or
// discovered from infra nodes' zones, into Cluster API's status entries and
// into the node labels a machine in one of them requires.
package failuredomains

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Status lists the failure domains for status.failureDomains: the explicit
// ones, else one per zone label value found on nodes, sorted by name.
func Status(spec []infrav1.FailureDomainSpec, nodes []corev1.Node) []clusterv1.FailureDomain {
	var out []clusterv1.FailureDomain
	if len(spec) > 0 {
		for _, fd := range spec {
			out = append(out, clusterv1.FailureDomain{Name: fd.Name, ControlPlane: ptr.To(ptr.Deref(fd.ControlPlane, true))})
		}
	} else {
		usable, open := map[string]bool{}, map[string]bool{}
		var zones []string
		anyOpen := false
		for i := range nodes {
			z := nodes[i].Labels[corev1.LabelTopologyZone]
			if z == "" {
				continue
			}
			if _, seen := usable[z]; !seen {
				zones = append(zones, z)
			}
			u := Usable(&nodes[i])
			usable[z] = usable[z] || u
			o := u && !Tainted(&nodes[i])
			open[z] = open[z] || o
			anyOpen = anyOpen || o
		}
		for _, z := range zones {
			// A zone whose nodes are all down or cordoned stays listed, but
			// Cluster API must not place a new control-plane machine there:
			// it would wait unscheduled while the control plane runs short.
			// So for a zone of tainted nodes only (GPU nodes kept for the
			// VMs that tolerate them), unless every zone is tainted: then
			// the control plane's VMs must tolerate the taints anyway.
			cp := usable[z]
			if anyOpen {
				cp = open[z]
			}
			out = append(out, clusterv1.FailureDomain{Name: z, ControlPlane: ptr.To(cp)})
		}
	}
	slices.SortFunc(out, func(a, b clusterv1.FailureDomain) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Selector is the node labels a machine in failure domain name requires:
// the explicit domain's selector, else the zone label.
func Selector(spec []infrav1.FailureDomainSpec, name string) map[string]string {
	for _, fd := range spec {
		if fd.Name == name && len(fd.NodeSelector) > 0 {
			return fd.NodeSelector
		}
	}
	return map[string]string{corev1.LabelTopologyZone: name}
}

// Usable says whether a node can take a new VM: Ready, schedulable, and not
// tainted unreachable or not-ready.
func Usable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Tainted says whether a node keeps off the VMs that tolerate nothing: a
// NoSchedule or NoExecute taint.
func Tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

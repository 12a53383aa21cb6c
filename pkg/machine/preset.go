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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
)

// hugepages2Mi is the node resource 2Mi hugepages are allocated from.
const hugepages2Mi corev1.ResourceName = corev1.ResourceHugePagesPrefix + "2Mi"

// numaFeatureGate is the KubeVirt feature gate that allows guest NUMA
// passthrough (docs/kubevirt-behaviour.md#dedicated-cpus-and-hugepages).
const numaFeatureGate = "NUMA"

// presetSupport checks, before the VM is created, that some Ready infra node
// can run the machine's performance preset, and whether the infra cluster's
// KubeVirt allows NUMA passthrough. Without such a node the machine fails
// with PresetUnsupported and looks again after the recheck period:
// nodes gain the CPU manager or hugepages through maintenance no event of
// ours announces.
func (s *Service) presetSupport(ctx context.Context, sc *Scope) (numa bool, o outcome.Outcome, err error) {
	p := sc.KubevirtMachine.Spec.Preset
	if p == nil || p.Name != infrav1.PresetPerformance {
		return false, outcome.Outcome{}, nil
	}
	infra := sc.Infra()
	nodes := &corev1.NodeList{}
	if err := infra.Client.List(ctx, nodes); err != nil {
		return false, outcome.Outcome{}, fmt.Errorf("listing infra nodes: %w", err)
	}
	if msg := performanceUnsupported(nodes.Items); msg != "" {
		return false, outcome.Fail(infrav1.PresetUnsupportedReason, msg).After(s.recheck()), nil
	}
	// Read once per VM creation, uncached: a steady state reads nothing.
	kvs := &kubevirtv1.KubeVirtList{}
	if err := infra.APIReader.List(ctx, kvs); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			// KubeVirt's CR is not readable: no passthrough, which is safe.
			return false, outcome.Outcome{}, nil
		}
		return false, outcome.Outcome{}, fmt.Errorf("reading the KubeVirt configuration: %w", err)
	}
	for _, kv := range kvs.Items {
		if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil && slices.Contains(dc.FeatureGates, numaFeatureGate) {
			return true, outcome.Outcome{}, nil
		}
	}
	return false, outcome.Outcome{}, nil
}

// performanceUnsupported says why no Ready infra node can run a performance
// VM, empty when one can.
func performanceUnsupported(nodes []corev1.Node) string {
	cpuManager, hugepages := 0, 0
	for i := range nodes {
		n := &nodes[i]
		if !util.IsNodeReady(n) || n.Spec.Unschedulable {
			continue
		}
		hasCPUManager := n.Labels[kubevirtv1.CPUManager] == "true"
		q := n.Status.Allocatable[hugepages2Mi]
		hasHugepages := !q.IsZero()
		if hasCPUManager {
			cpuManager++
		}
		if hasHugepages {
			hugepages++
		}
		if hasCPUManager && hasHugepages {
			return ""
		}
	}
	switch {
	case cpuManager == 0 && hugepages == 0:
		return fmt.Sprintf("the performance preset needs dedicated CPUs and 2Mi hugepages, but no Ready infra node has the CPU manager (label %s=true) or %s", kubevirtv1.CPUManager, hugepages2Mi)
	case cpuManager == 0:
		return fmt.Sprintf("the performance preset needs dedicated CPUs, but no Ready infra node has the CPU manager (label %s=true, set by KubeVirt where the kubelet runs the static CPU manager policy)", kubevirtv1.CPUManager)
	case hugepages == 0:
		return fmt.Sprintf("the performance preset needs 2Mi hugepages, but no Ready infra node offers %s", hugepages2Mi)
	}
	return fmt.Sprintf("the performance preset needs dedicated CPUs and 2Mi hugepages on one node, but the %d Ready infra nodes with the CPU manager have no %s", cpuManager, hugepages2Mi)
}

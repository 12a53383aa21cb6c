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

	"github.com/blang/semver/v4"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// numaFeatureGate is the KubeVirt feature gate that allowed guest NUMA
// passthrough before it became generally available in KubeVirt 1.4
// (docs/kubevirt-behaviour.md#dedicated-cpus-and-hugepages).
const numaFeatureGate = "NUMA"

// presetSupport checks, before the VM is created, that some Ready,
// schedulable infra node can run the machine's performance preset, and
// whether the infra cluster's KubeVirt allows NUMA passthrough. Without
// such a node the machine fails with PresetUnsupported and looks again
// after the recheck period: nodes gain the CPU manager or hugepages through
// maintenance no event of ours announces. Both are read uncached, once per
// VM creation; what the kubeconfig may not read is not checked.
func (s *Service) presetSupport(ctx context.Context, sc *Scope) (numa bool, o outcome.Outcome, err error) {
	p := sc.KubevirtMachine.Spec.Preset
	if p == nil || p.Name != infrav1.PresetPerformance {
		return false, outcome.Outcome{}, nil
	}
	infra := sc.Access.Infra
	readCtx, cancel := context.WithTimeout(ctx, infraReadTimeout)
	defer cancel()
	nodes := &corev1.NodeList{}
	switch err := infra.APIReader.List(readCtx, nodes); {
	case apierrors.IsForbidden(err):
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot list infra nodes; the performance preset is not checked against them", "reason", err.Error())
	case err != nil:
		return false, outcome.Outcome{}, fmt.Errorf("listing infra nodes: %w", err)
	default:
		pageSize := vmbuilder.HugepageSize
		if m := sc.KubevirtMachine.Spec.VirtualMachineTemplate.Spec.Template; m != nil && m.Spec.Domain.Memory != nil && m.Spec.Domain.Memory.Hugepages != nil {
			pageSize = m.Spec.Domain.Memory.Hugepages.PageSize
		}
		if msg := performanceUnsupported(nodes.Items, corev1.ResourceName(corev1.ResourceHugePagesPrefix+pageSize)); msg != "" {
			return false, outcome.Fail(infrav1.PresetUnsupportedReason, msg).After(s.recheck()), nil
		}
	}
	kvs := &kubevirtv1.KubeVirtList{}
	if err := infra.APIReader.List(readCtx, kvs); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			// KubeVirt's CR is not readable: no passthrough, which is safe.
			return false, outcome.Outcome{}, nil
		}
		return false, outcome.Outcome{}, fmt.Errorf("reading the KubeVirt configuration: %w", err)
	}
	return slices.ContainsFunc(kvs.Items, numaAllowed), outcome.Outcome{}, nil
}

// numaAllowed reports whether a KubeVirt installation accepts guest NUMA
// passthrough: from 1.4 always, before only with the NUMA feature gate.
func numaAllowed(kv kubevirtv1.KubeVirt) bool {
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil && slices.Contains(dc.FeatureGates, numaFeatureGate) {
		return true
	}
	v, err := semver.ParseTolerant(kv.Status.ObservedKubeVirtVersion)
	return err == nil && v.GTE(semver.Version{Major: 1, Minor: 4})
}

// performanceUnsupported says why no Ready, schedulable infra node can run
// a performance VM whose memory comes from hugepages resource, empty when
// one can.
func performanceUnsupported(nodes []corev1.Node, hugepages corev1.ResourceName) string {
	cpuManager, withHugepages := 0, 0
	for i := range nodes {
		n := &nodes[i]
		if !util.IsNodeReady(n) || n.Spec.Unschedulable || n.Labels[kubevirtv1.NodeSchedulable] == "false" {
			continue
		}
		// KubeVirt before 1.8 labels such nodes cpumanager=true, later
		// releases kubevirt.io/cpumanager=true.
		hasCPUManager := n.Labels[kubevirtv1.CPUManager] == "true" || n.Labels[kubevirtv1.DeprecatedCPUManager] == "true"
		q := n.Status.Allocatable[hugepages]
		hasHugepages := !q.IsZero()
		if hasCPUManager {
			cpuManager++
		}
		if hasHugepages {
			withHugepages++
		}
		if hasCPUManager && hasHugepages {
			return ""
		}
	}
	switch {
	case cpuManager == 0 && withHugepages == 0:
		return fmt.Sprintf("the performance preset needs dedicated CPUs and hugepages, but no Ready infra node has the CPU manager (label %s=true or %s=true) or %s", kubevirtv1.CPUManager, kubevirtv1.DeprecatedCPUManager, hugepages)
	case cpuManager == 0:
		return fmt.Sprintf("the performance preset needs dedicated CPUs, but no Ready infra node has the CPU manager (label %s=true, or %s=true before KubeVirt 1.8, set by KubeVirt where the kubelet runs the static CPU manager policy)", kubevirtv1.CPUManager, kubevirtv1.DeprecatedCPUManager)
	case withHugepages == 0:
		return fmt.Sprintf("the performance preset needs hugepages, but no Ready infra node offers %s", hugepages)
	}
	return fmt.Sprintf("the performance preset needs dedicated CPUs and hugepages on one node, but the %d Ready infra nodes with the CPU manager have no %s", cpuManager, hugepages)
}

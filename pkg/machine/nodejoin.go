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
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// DefaultNodeJoinTimeout is how long a running VM may go without its Node
// joining before NodeJoined turns into a warning.
const DefaultNodeJoinTimeout = 10 * time.Minute

// nodeJoin judges whether the guest of a running VM joined its workload
// cluster: Cluster API found a Node with the machine's providerID (node is
// its name), or, after timeout, why it may never: a guest without kubeadm,
// kubelet and a container runtime of the machine's version boots and never
// joins, and nothing but this tells the user. The wait is a real clock, so
// the outcome requeues for when it ends.
func nodeJoin(node string, runningFor, timeout time.Duration, image, version string) outcome.Outcome {
	if node != "" {
		return outcome.Ready(infrav1.NodeJoinedReason, fmt.Sprintf("Node %s joined the workload cluster", node))
	}
	if runningFor < timeout {
		return outcome.Wait(infrav1.WaitingForNodeReason, "the VM runs; waiting for its guest to join the workload cluster").
			After(timeout - runningFor)
	}
	want := "the machine's Kubernetes version"
	if version != "" {
		want = version
	}
	return outcome.Fail(infrav1.NodeNotJoinedReason, fmt.Sprintf(
		"no Node has joined the workload cluster within %s of the VM running: image %s must carry kubeadm, kubelet and a container runtime for %s, "+
			"or the bootstrap data must install them (docs/images.md); cloud-init or Ignition output is on the VM's serial console (virtctl console)",
		timeout, image, want))
}

// imageOf names the image a machine boots, for messages.
func imageOf(km *infrav1.KubevirtMachine) string {
	if rd := km.Spec.RootDisk; rd != nil {
		if d := goldenplan.Describe(&rd.Image); d != "" {
			return d
		}
	}
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil {
		for _, v := range t.Spec.Volumes {
			if v.ContainerDisk != nil {
				return v.ContainerDisk.Image
			}
		}
	}
	return "(unknown)"
}

// runningFor is how long the instance has been running.
func runningFor(vmi *kubevirtv1.VirtualMachineInstance, now time.Time) time.Duration {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			return now.Sub(t.PhaseTransitionTimestamp.Time)
		}
	}
	return 0
}

// reportNodeJoin records what NodeJoined says from the tenant Node found with the
// machine's providerID (node, empty when none), else the Machine's nodeRef,
// and how long the instance has run.
func (s *Service) reportNodeJoin(sc *Scope, vmi *kubevirtv1.VirtualMachineInstance, node string, found *findings) outcome.Outcome {
	version := ""
	if sc.Machine != nil {
		version = sc.Machine.Spec.Version
		if node == "" {
			node = sc.Machine.Status.NodeRef.Name
		}
	}
	if c := conditions.Get(sc.KubevirtMachine, infrav1.NodeJoinedCondition); node == "" && c != nil && c.Status == metav1.ConditionTrue {
		// Joined stays joined: a Node out of sight (the tenant cluster
		// unreachable, the Node deleted) is the Machine's NodeHealthy's
		// to report, and must not flap this condition.
		return outcome.Ready(c.Reason, c.Message)
	}
	timeout := s.NodeJoinTimeout
	if timeout <= 0 {
		timeout = DefaultNodeJoinTimeout
	}
	o := nodeJoin(node, runningFor(vmi, time.Now()), timeout, imageOf(sc.KubevirtMachine), version)
	found.nodeJoin = &o
	return o
}

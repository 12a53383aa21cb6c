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

// Package evacuation moves a KubevirtMachine's VM off an infra node that
// is being drained: KubeVirt's External eviction strategy leaves that to the
// provider. It live migrates the VM when KubeVirt says it can, else drains
// the tenant Node and restarts the VM elsewhere (or replaces the Machine),
// one control plane machine at a time, and mirrors KubeVirt's live
// migration state onto the machine (docs/operations.md).
package evacuation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/tenantdrain"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// drainRetry is how soon a tenant drain evicts again what it could not
// evict yet; nothing in the tenant cluster that the provider watches says
// when a PodDisruptionBudget allows more.
const drainRetry = 2 * time.Second

// Evacuator does the evacuations of all KubevirtMachines.
type Evacuator struct {
	// Client reaches the management cluster.
	Client client.Client
	// Recorder records Events on KubevirtMachines.
	Recorder events.EventRecorder
	// ClusterCache reaches tenant clusters, to drain their Nodes.
	ClusterCache clustercache.ClusterCache

	// turns lets one control plane machine at a time evacuate.
	turns turnTable
}

// Target is one machine to evacuate, with what the evacuation needs of it.
type Target struct {
	KubevirtMachine *infrav1.KubevirtMachine
	// Machine and Cluster own the KubevirtMachine; evacuation does not
	// start without them.
	Machine *clusterv1.Machine
	Cluster *clusterv1.Cluster
	// Infra is the machine's infra cluster.
	Infra *infracluster.Infra
	// DeleteInstance deletes exactly this instance of the VM, the way the
	// machine service restarts a VM.
	DeleteInstance func(context.Context, *kubevirtv1.VirtualMachineInstance) error
	// Evacuating collects where the evacuation stood at each step, for the
	// machine service to write into the Evacuating condition.
	Evacuating *Steps
}

// Steps is where an evacuation stood at each of its steps, in order.
type Steps []metav1.Condition

// Record adds a step: the Evacuating condition's status, reason and
// message.
func (s *Steps) Record(status metav1.ConditionStatus, reason, message string) {
	*s = append(*s, metav1.Condition{Type: infrav1.EvacuatingCondition, Status: status, Reason: reason, Message: message})
}

// evacuationRequested says whether KubeVirt asks the provider to move the
// instance: virt-api marks an instance with the External eviction strategy
// whose launcher pod an infra drain evicts, and leaves moving it to the
// provider (docs/kubevirt-behaviour.md#eviction-of-a-launcher-pod-starts-an-evacuation).
func evacuationRequested(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.Status.EvacuationNodeName != "" && vmi.DeletionTimestamp.IsZero() && !vmstatus.Finished(vmi) &&
		ptr.Deref(vmi.Spec.EvictionStrategy, "") == kubevirtv1.EvictionStrategyExternal
}

// Step moves a VM with the External eviction strategy off a draining
// infra node, one step per call: wait for the control plane's turn, live
// migrate it if it can, else (or when that fails) cordon and drain the
// tenant Node, delete the instance (or the Machine), wait for the VM to
// run again elsewhere, uncordon. status.evacuation keeps the
// progress. It returns when to look again, where no event will say.
func (s *Evacuator) Step(ctx context.Context, sc *Target, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	km := sc.KubevirtMachine
	if km.Status.Evacuation == nil {
		if !evacuationRequested(vmi) || sc.Machine == nil || !sc.Machine.DeletionTimestamp.IsZero() {
			return 0, nil
		}
		if util.IsControlPlaneMachine(sc.Machine) {
			other, err := s.controlPlaneTurnTaken(ctx, sc)
			if err != nil {
				return 0, err
			}
			if other != "" {
				sc.Evacuating.Record(metav1.ConditionTrue, infrav1.WaitingForControlPlaneTurnReason, fmt.Sprintf(
					"infra node %s is draining; waiting until machine %s of the same control plane has been evacuated and is healthy, so that the control plane keeps its quorum",
					vmi.Status.EvacuationNodeName, other))
				return drainRetry, nil
			}
		}
		km.Status.Evacuation = &infrav1.EvacuationStatus{
			InfraNodeName: vmi.Status.EvacuationNodeName, StartTime: metav1.Now(), InstanceUID: string(vmi.UID),
			TenantNodeName: tenantNodeName(sc),
		}
	}
	ev := km.Status.Evacuation
	if !ev.InstanceDeleted {
		if vmi != nil && string(vmi.UID) == ev.InstanceUID && vmi.Status.EvacuationNodeName == "" && !vmstatus.Finished(vmi) {
			// KubeVirt no longer asks (the infra node was uncordoned): give
			// the tenant Node back if it was cordoned for this.
			if ev.CordonedTenantNode {
				if ready, err := s.uncordonWhenReady(ctx, sc, ev.TenantNodeName); err != nil || !ready {
					return 0, err
				}
			}
			if wait := migrationReportDue(km, vmi, ev, time.Now()); wait > 0 {
				// The target took the VM over but has not reported the
				// migration completed: its next status update says so,
				// else the migration timeout ends the wait.
				return wait, nil
			}
			msg := "KubeVirt no longer asks the VM to leave " + ev.InfraNodeName
			if ev.MigrationUID != "" && vmi.Status.NodeName != ev.InfraNodeName {
				msg = fmt.Sprintf("live migration %s moved the VM from infra node %s to %s", ev.MigrationName, ev.InfraNodeName, vmi.Status.NodeName)
			}
			s.finishEvacuation(sc, msg)
			return 0, nil
		}
		if vmi != nil && string(vmi.UID) == ev.InstanceUID {
			if migrating, wait, err := s.migrateFirst(ctx, sc, vmi, ev); err != nil || migrating {
				return wait, err
			}
		}
		drained, wait, err := s.drainTenantNode(ctx, sc, ev)
		if err != nil || !drained {
			return wait, err
		}
		return 0, s.leave(ctx, sc, vm, vmi, ev)
	}
	if vmi == nil || string(vmi.UID) == ev.InstanceUID || vmi.Status.NodeName == "" || vmi.Status.NodeName == ev.InfraNodeName ||
		!instanceReady(vmi) {
		// The new instance's events bring the machine back here.
		return 0, nil
	}
	if ev.CordonedTenantNode {
		ready, err := s.uncordonWhenReady(ctx, sc, ev.TenantNodeName)
		if err != nil || !ready {
			return 0, err
		}
	}
	s.finishEvacuation(sc, fmt.Sprintf("the VM left infra node %s and runs on %s", ev.InfraNodeName, vmi.Status.NodeName))
	return 0, nil
}

// leave deletes the instance so that KubeVirt starts the VM on another
// infra node, or the Machine so that its owner replaces it. A VM whose
// run strategy would not start it again is replaced whatever the action
// says: deleting its instance would leave it stopped.
func (s *Evacuator) leave(ctx context.Context, sc *Target, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, ev *infrav1.EvacuationStatus) error {
	km := sc.KubevirtMachine
	replace := km.Spec.Evacuation.Action == infrav1.EvacuationReplaceMachine
	if !replace && vm != nil && !vmstatus.Restartable(vm) {
		replace = true
		s.Recorder.Eventf(km, nil, corev1.EventTypeWarning, "EvacuationActionOverridden", "Evacuate",
			"evacuation action is %s but the VirtualMachine has runStrategy %s and would stay stopped; replacing Machine %s instead",
			infrav1.EvacuationRestartVM, vmstatus.RunStrategy(vm), sc.Machine.Name)
	}
	if replace {
		if err := s.Client.Delete(ctx, sc.Machine); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Machine %s to replace it: %w", sc.Machine.Name, err)
		}
		ev.InstanceDeleted = true
		sc.Evacuating.Record(metav1.ConditionTrue, infrav1.ReplacingMachineReason, fmt.Sprintf(
			"infra node %s is draining: deleted Machine %s so that its owner replaces it", ev.InfraNodeName, sc.Machine.Name))
		return nil
	}
	if vmi != nil && string(vmi.UID) == ev.InstanceUID {
		if err := sc.DeleteInstance(ctx, vmi); err != nil {
			return err
		}
	}
	ev.InstanceDeleted = true
	sc.Evacuating.Record(metav1.ConditionTrue, infrav1.RestartingVMReason, fmt.Sprintf(
		"infra node %s is draining: deleted the VM instance; waiting for KubeVirt to run the VM on another infra node", ev.InfraNodeName))
	return nil
}

// drainTenantNode cordons the tenant Node and evicts its pods; it reports
// whether the VM may leave: the Node is empty, gone or unreachable, or the
// tenant drain timeout is over.
func (s *Evacuator) drainTenantNode(ctx context.Context, sc *Target, ev *infrav1.EvacuationStatus) (bool, time.Duration, error) {
	km := sc.KubevirtMachine
	if ev.TenantNodeName == "" {
		return true, 0, nil
	}
	timeout := time.Duration(ptr.Deref(km.Spec.Evacuation.TenantDrainTimeoutSeconds, 600)) * time.Second
	deadline := ev.StartTime.Add(timeout)
	overdue := timeout > 0 && time.Now().After(deadline)
	key := client.ObjectKeyFromObject(sc.Cluster)
	c, err := s.ClusterCache.GetClient(ctx, key)
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		// The tenant's API is away: its Node cannot be drained, and the VM
		// must not hold the infra drain for it.
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: ev.TenantNodeName}, node); apierrors.IsNotFound(err) {
		return true, 0, nil
	} else if err != nil {
		return false, 0, fmt.Errorf("reading tenant Node %s: %w", ev.TenantNodeName, err)
	}
	if !ev.CordonedTenantNode {
		cordoned, err := tenantdrain.Cordon(ctx, c, node)
		if err != nil {
			return false, 0, err
		}
		ev.CordonedTenantNode = cordoned
	}
	// kubectl's drain library speaks client-go; it lists the Node's pods
	// from the API server, not a cache that would need a pod informer.
	cfg, err := s.ClusterCache.GetRESTConfig(ctx, key)
	if err != nil {
		return false, 0, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, 0, fmt.Errorf("a client for the tenant cluster of %s: %w", key, err)
	}
	res, err := tenantdrain.Drain(ctx, cs, ev.TenantNodeName)
	if err != nil {
		return false, 0, err
	}
	if res.Done() {
		return true, 0, nil
	}
	if overdue {
		s.Recorder.Eventf(km, nil, corev1.EventTypeWarning, "TenantDrainTimedOut", "Evacuate",
			"tenant Node %s still has %s after tenantDrainTimeoutSeconds (%s); the VM leaves infra node %s anyway",
			ev.TenantNodeName, strings.Join(res.Remaining, ", "), timeout, ev.InfraNodeName)
		return true, 0, nil
	}
	until := "forever (tenantDrainTimeoutSeconds is 0)"
	if timeout > 0 {
		until = "until " + deadline.UTC().Format(time.RFC3339)
	}
	if len(res.Blocked) > 0 {
		sc.Evacuating.Record(metav1.ConditionTrue, infrav1.TenantDrainBlockedReason, fmt.Sprintf(
			"infra node %s is draining; tenant Node %s is cordoned but the API does not allow evicting %s yet; waiting %s",
			ev.InfraNodeName, ev.TenantNodeName, strings.Join(res.Blocked, ", "), until))
	} else {
		sc.Evacuating.Record(metav1.ConditionTrue, infrav1.DrainingTenantNodeReason, fmt.Sprintf(
			"infra node %s is draining; tenant Node %s is cordoned, waiting for %s to leave, %s",
			ev.InfraNodeName, ev.TenantNodeName, strings.Join(res.Remaining, ", "), until))
	}
	if timeout > 0 {
		return false, min(drainRetry, time.Until(deadline)+time.Second), nil
	}
	return false, drainRetry, nil
}

// uncordonWhenReady makes the tenant Node schedulable again once it is
// Ready; it reports whether that is done (or not needed any more).
func (s *Evacuator) uncordonWhenReady(ctx context.Context, sc *Target, name string) (bool, error) {
	c, err := s.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(sc.Cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, node); apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("reading tenant Node %s: %w", name, err)
	}
	if !util.IsNodeReady(node) {
		sc.Evacuating.Record(metav1.ConditionTrue, infrav1.RestartingVMReason, fmt.Sprintf(
			"the VM runs again; waiting for tenant Node %s to be Ready before uncordoning it", name))
		return false, nil
	}
	return true, tenantdrain.Uncordon(ctx, c, node)
}

// finishEvacuation ends the evacuation and gives the control plane's turn
// to the next machine.
func (s *Evacuator) finishEvacuation(sc *Target, message string) {
	km := sc.KubevirtMachine
	km.Status.Evacuation = nil
	sc.Evacuating.Record(metav1.ConditionFalse, infrav1.EvacuatedReason, message)
	if sc.Cluster != nil {
		s.releaseTurn(client.ObjectKeyFromObject(sc.Cluster), km.Name)
	}
}

func tenantNodeName(sc *Target) string {
	if sc.Machine != nil && sc.Machine.Status.NodeRef.IsDefined() {
		return sc.Machine.Status.NodeRef.Name
	}
	return ""
}

func instanceReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi.Status.Phase != kubevirtv1.Running {
		return false
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// controlPlaneTurnTaken names another machine of the same control plane
// that is being evacuated, deleted or is not healthy, or claims the turn
// for this one. The claim is
// kept in memory, against two reconciles racing, and in the machines'
// status.evacuation, against a restart of the provider.
func (s *Evacuator) controlPlaneTurnTaken(ctx context.Context, sc *Target) (string, error) {
	key := client.ObjectKeyFromObject(sc.Cluster)
	km := sc.KubevirtMachine
	machines := &clusterv1.MachineList{}
	if err := s.Client.List(ctx, machines, client.InNamespace(key.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return "", fmt.Errorf("listing the control plane Machines of %s: %w", key, err)
	}
	members := map[string]bool{}
	for i := range machines.Items {
		m := &machines.Items[i]
		ref := m.Spec.InfrastructureRef
		members[ref.Name] = ref.Name != ""
		if ref.Name == "" || ref.Name == km.Name {
			continue
		}
		if !m.DeletionTimestamp.IsZero() || !conditions.IsTrue(m, clusterv1.MachineNodeHealthyCondition) {
			// A member going away, or not back yet (a replacement joining,
			// a restarted VM booting): one more down could cost the quorum.
			return m.Name + " (not healthy yet)", nil
		}
		other := &infrav1.KubevirtMachine{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: ref.Name}, other); client.IgnoreNotFound(err) != nil {
			return "", err
		} else if err == nil && other.Status.Evacuation != nil {
			return other.Name, nil
		}
	}
	return s.claimTurn(key, km.Name, members), nil
}

// turnGrace is how long an in-memory claim on a control plane's turn holds
// without the claimer's status.evacuation, which takes over once written.
const turnGrace = time.Minute

// turnTable holds, per Cluster, which control plane machine may evacuate.
type turnTable struct {
	mu      sync.Mutex
	holders map[types.NamespacedName]turn
}

type turn struct {
	machine string
	since   time.Time
}

// claimTurn gives the turn to machine unless another member of the
// control plane claimed it recently; it returns that other machine. A
// claim by a machine that is no longer a member (it was replaced, and so
// never finished its evacuation) does not hold.
func (s *Evacuator) claimTurn(cluster types.NamespacedName, machine string, members map[string]bool) string {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	if t, ok := s.turns.holders[cluster]; ok && t.machine != machine && members[t.machine] && time.Since(t.since) < turnGrace {
		return t.machine
	}
	if s.turns.holders == nil {
		s.turns.holders = map[types.NamespacedName]turn{}
	}
	s.turns.holders[cluster] = turn{machine: machine, since: time.Now()}
	return ""
}

// releaseTurn frees the turn if machine holds it.
func (s *Evacuator) releaseTurn(cluster types.NamespacedName, machine string) {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	if s.turns.holders[cluster].machine == machine {
		delete(s.turns.holders, cluster)
	}
}

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
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
)

// The milestones of a tenant cluster, in the order it reaches them.
const (
	clusterCreated            = "created"
	clusterEndpoint           = "endpoint"
	clusterInitialized        = "control plane initialized"
	clusterInfraProvisioned   = "infrastructure provisioned"
	machineCreated            = "created"
	machineBootstrapData      = "bootstrap data"
	machineVMCreated          = "VM created"
	machineDiskCreated        = "disk created"
	machineDiskReady          = "disk ready"
	machineVMICreated         = "VMI created"
	machineVMIRunning         = "VMI running"
	machineVMIReady           = "VMI ready"
	machineInfraProvisioned   = "KubevirtMachine provisioned"
	machineProvisioned        = "Machine provisioned"
	machineNode               = "Node"
	workerBootstrapAfterInit  = "control plane initialized -> worker bootstrap data"
	controlPlaneInitAfterNode = "control plane Node -> control plane initialized"
)

// machineMilestones are a machine's milestones in the order it reaches
// them; a wait is the time between two of them.
var machineMilestones = []string{machineCreated, machineBootstrapData, machineVMCreated, machineDiskCreated, machineDiskReady,
	machineVMICreated, machineVMIRunning, machineVMIReady, machineInfraProvisioned, machineProvisioned, machineNode}

// waitOwners say whose work or wait each step between two consecutive
// machine milestones is, for the report (docs/benchmark.md#the-timeline).
var waitOwners = map[string]string{
	machineBootstrapData:    "Cluster API (kubeadm bootstrap)",
	machineVMCreated:        "provider",
	machineDiskCreated:      "KubeVirt (virt-controller)",
	machineDiskReady:        "CDI",
	machineVMICreated:       "KubeVirt (virt-controller)",
	machineVMIRunning:       "KubeVirt (launcher pod, scheduler, node agents)",
	machineVMIReady:         "the guest's boot",
	machineInfraProvisioned: "provider",
	machineProvisioned:      "Cluster API (Machine controller)",
	machineNode:             "the guest's kubelet, Cluster API",
}

// timeline notes, from watches, when each cluster and each machine was
// first seen at each milestone. Objects are keyed namespace/name; the
// KubeVirt objects of a machine are named after its infrastructure
// machine, which names are joined to Machines only when summarizing,
// whatever order the watches deliver them in.
type timeline struct {
	// start is when the first cluster was created, the timeline's zero.
	start    time.Time
	mu       sync.Mutex
	clusters map[string]map[string]time.Time
	// machines are by Machine, infra by infrastructure machine name.
	machines, infra map[string]map[string]time.Time
	// machineInfo is what a Machine says about itself: its infrastructure
	// machine, its cluster and whether it is a control-plane machine.
	machineInfo map[string]machineInfo
}

type machineInfo struct {
	infra, cluster string
	controlPlane   bool
}

func newTimeline() *timeline {
	return &timeline{clusters: map[string]map[string]time.Time{}, machines: map[string]map[string]time.Time{},
		infra: map[string]map[string]time.Time{}, machineInfo: map[string]machineInfo{}}
}

// watch adds the timeline's handlers to c, which must not have started
// yet; with kubevirtMachines, it also watches this provider's
// KubevirtMachines.
func (tl *timeline) watch(ctx context.Context, c cache.Cache, kubevirtMachines bool) error {
	handlers := map[client.Object]func(client.Object){
		&clusterv1.Cluster{}:                 tl.onCluster,
		&clusterv1.Machine{}:                 tl.onMachine,
		&kubevirtv1.VirtualMachine{}:         func(o client.Object) { tl.note(tl.infra, key(o), machineVMCreated) },
		&cdiv1.DataVolume{}:                  tl.onDataVolume,
		&kubevirtv1.VirtualMachineInstance{}: tl.onVMI,
	}
	if kubevirtMachines {
		handlers[&infrav1.KubevirtMachine{}] = tl.onKubevirtMachine
	}
	for obj, handle := range handlers {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		on := func(o any) {
			if obj, ok := o.(client.Object); ok {
				handle(obj)
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }}); err != nil {
			return err
		}
	}
	return nil
}

func key(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (tl *timeline) onCluster(o client.Object) {
	cl := o.(*clusterv1.Cluster)
	k := key(cl)
	tl.note(tl.clusters, k, clusterCreated)
	if cl.Spec.ControlPlaneEndpoint.Host != "" {
		tl.note(tl.clusters, k, clusterEndpoint)
	}
	if ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
		tl.note(tl.clusters, k, clusterInfraProvisioned)
	}
	if ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false) {
		tl.note(tl.clusters, k, clusterInitialized)
	}
}

func (tl *timeline) onMachine(o client.Object) {
	m := o.(*clusterv1.Machine)
	k := key(m)
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	tl.mu.Lock()
	tl.machineInfo[k] = machineInfo{infra: m.Namespace + "/" + m.Spec.InfrastructureRef.Name, cluster: m.Namespace + "/" + m.Spec.ClusterName, controlPlane: cp}
	tl.mu.Unlock()
	tl.note(tl.machines, k, machineCreated)
	if m.Spec.Bootstrap.DataSecretName != nil {
		tl.note(tl.machines, k, machineBootstrapData)
	}
	if ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
		tl.note(tl.machines, k, machineProvisioned)
	}
	if m.Status.NodeRef.IsDefined() {
		tl.note(tl.machines, k, machineNode)
	}
}

func (tl *timeline) onDataVolume(o client.Object) {
	dv := o.(*cdiv1.DataVolume)
	vm, ok := strings.CutSuffix(key(dv), rootDiskSuffix)
	if !ok || dv.Labels[goldenplan.Label] == "true" {
		return
	}
	tl.note(tl.infra, vm, machineDiskCreated)
	if dv.Status.Phase == cdiv1.Succeeded {
		tl.note(tl.infra, vm, machineDiskReady)
	}
}

func (tl *timeline) onVMI(o client.Object) {
	vmi := o.(*kubevirtv1.VirtualMachineInstance)
	tl.note(tl.infra, key(vmi), machineVMICreated)
	if vmi.Status.Phase == kubevirtv1.Running {
		tl.note(tl.infra, key(vmi), machineVMIRunning)
	}
	if vmiReady(vmi) {
		tl.note(tl.infra, key(vmi), machineVMIReady)
	}
}

// vmiReady is KubeVirt's Ready condition with an address to reach the
// guest at: what any provider needs before it can call a machine
// provisioned.
func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	ready := false
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, iface := range vmi.Status.Interfaces {
		if ready && iface.IP != "" {
			return true
		}
	}
	return false
}

func (tl *timeline) onKubevirtMachine(o client.Object) {
	km := o.(*infrav1.KubevirtMachine)
	if ptr.Deref(km.Status.Initialization.Provisioned, false) {
		tl.note(tl.infra, key(km), machineInfraProvisioned)
	}
}

func (tl *timeline) note(into map[string]map[string]time.Time, k, milestone string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if into[k] == nil {
		into[k] = map[string]time.Time{}
	}
	if _, seen := into[k][milestone]; !seen {
		into[k][milestone] = time.Now()
	}
}

// infraMachines are the infrastructure machines of every Machine seen,
// namespace/name.
func (tl *timeline) infraMachines() map[string]bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string]bool{}
	for _, info := range tl.machineInfo {
		out[info.infra] = true
	}
	return out
}

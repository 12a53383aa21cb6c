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

// Package machine holds what the KubevirtMachine controller does once it has
// fetched its objects: create the VM and its user data on the infra cluster,
// report its state, check bootstrap, tell the tenant Node its providerID, and
// delete it all again.
package machine

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/evacuation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/statuspacing"
)

// Scope is one KubevirtMachine with the objects around it.
type Scope struct {
	KubevirtMachine *infrav1.KubevirtMachine
	// Machine and Cluster are nil while the machine has no owner yet (only
	// during deletion can that be the case here).
	Machine *clusterv1.Machine
	Cluster *clusterv1.Cluster
	// KubevirtCluster is nil when the Cluster's infrastructure is not one.
	KubevirtCluster *infrav1.KubevirtCluster
	// Access is the machine's infra cluster and whether it can be used.
	Access infracluster.Access
	// VM is where the machine's VM goes: the KubevirtMachine's name, in
	// the template's namespace, else the infra cluster's. SetAccess sets
	// it; it is empty while the infra cluster's kubeconfig cannot be used.
	VM types.NamespacedName
	// UserData is the VM's user data Secret, beside the VM; set with VM.
	UserData types.NamespacedName
	// FinalizerStored is false in the reconcile that adds the finalizer:
	// it reports the machine's state but creates no VM.
	FinalizerStored bool
}

// SetAccess records the machine's infra cluster and, once its kubeconfig
// can be used, where the VM and its user data go there. The phases read the
// names, not the rule, so the rule is written once.
func (s *Scope) SetAccess(access infracluster.Access) {
	s.Access = access
	if access.Infra == nil {
		return
	}
	ns := s.KubevirtMachine.Spec.VirtualMachineTemplate.ObjectMeta.Namespace
	if ns == "" {
		ns = access.Infra.Namespace
	}
	name := s.KubevirtMachine.Name
	s.VM = types.NamespacedName{Namespace: ns, Name: name}
	s.UserData = types.NamespacedName{Namespace: ns, Name: name + infrav1.UserDataSecretSuffix}
}

// Service does the work of the KubevirtMachine controller.
type Service struct {
	// Client reaches the management cluster; Secrets are read uncached.
	Client client.Client
	// Recorder records Events on KubevirtMachines.
	Recorder events.EventRecorder
	// ClusterCache reaches tenant clusters, to set a Node's providerID.
	ClusterCache clustercache.ClusterCache
	// Evacuation moves VMs off draining infra nodes.
	Evacuation *evacuation.Evacuator
	// SSH runs the ssh bootstrap check.
	SSH *sshcheck.Prober
	// RecheckAfter is how long to wait before checking again what has no
	// event to wait for: bootstrap over SSH, clone permissions.
	RecheckAfter time.Duration
	// InfraNodeLabels are the infra node label keys copied to the tenant
	// Node of a VM placed there (InfraNodeLabelKeys).
	InfraNodeLabels []string
	// NodeJoinTimeout is how long a running VM may go without a Node
	// before NodeJoined warns; zero is DefaultNodeJoinTimeout.
	NodeJoinTimeout time.Duration
	// Status decides when machines' status is written and times their
	// stages; the controller, which writes the status, shares it.
	Status *statuspacing.Keeper
}

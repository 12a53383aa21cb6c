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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/evacuation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/guardrails"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmstatus"
)

// Reconcile moves a machine towards a running, bootstrapped VM and reports
// where it stands in VirtualMachineReady and BootstrapSucceeded, the
// conditions only this service writes. The outcome says whether the machine
// is provisioned, and when to look again where no event will say. It runs
// the phases below in order, like Cluster API's machine controller; a phase
// that ends the reconcile says so.
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (outcome.Outcome, error) {
	r := &reconcileRun{}
	for _, phase := range []func(context.Context, *Scope, *reconcileRun) (outcome.Outcome, bool, error){
		s.reconcileOwners,   // a Machine, its Cluster and a usable infra cluster
		s.reconcilePoolVM,   // a VM a pool made: found, never created
		s.reconcileVM,       // the VM: found, else created
		s.reconcileUserData, // the VM's user data Secret
		s.reconcileInstance, // its instance: restart, live migration, evacuation
		s.reconcileInPlace,  // an in-place update of the running VM
		s.reconcileReport,   // its state, the bootstrap check, the tenant Node
	} {
		if o, end, err := phase(ctx, sc, r); err != nil || end {
			return o, err
		}
	}
	return outcome.Outcome{}, nil
}

// reconcileRun carries what a reconcile's phases found for the next ones.
type reconcileRun struct {
	vm  *kubevirtv1.VirtualMachine
	vmi *kubevirtv1.VirtualMachineInstance
	// requeue is when the evacuation asked to look again.
	requeue time.Duration
}

// reconcileOwners waits for the machine's owners and for its infra cluster.
func (s *Service) reconcileOwners(_ context.Context, sc *Scope, _ *reconcileRun) (outcome.Outcome, bool, error) {
	km := sc.KubevirtMachine
	if sc.Cluster == nil {
		return s.recordVM(km, outcome.Wait(infrav1.WaitingForOwnerReason,
			"waiting for a Machine to own this KubevirtMachine and for its Cluster to exist")), true, nil
	}
	if sc.Access.Available() {
		return outcome.Outcome{}, false, nil
	}
	o := sc.Access.Outcome
	if provisioned(km) {
		// A provisioned machine's VM keeps running while its infra
		// cluster's API is away; only InfraClusterAvailable says so.
		return o, true, nil
	}
	return s.recordVM(km, outcome.Outcome{State: o.State, Reason: o.Reason, RequeueAfter: o.RequeueAfter,
		Message: "cannot use the infra cluster: " + o.Message}), true, nil
}

// reconcileVM finds the machine's VM, or creates it. The reconcile ends
// with the create, with a VM deleted outside the provider, and with a VM
// of the same name that is someone else's. A pool's VM was found already.
func (s *Service) reconcileVM(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	if r.vm != nil {
		return outcome.Outcome{}, false, nil
	}
	km := sc.KubevirtMachine
	vm := &kubevirtv1.VirtualMachine{}
	key := types.NamespacedName{Namespace: sc.VMNamespace(), Name: sc.VMName()}
	found, err := get(ctx, sc.Infra().Client, key, vm)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	if !found && vmCreated(km) {
		// The cache may lag behind our own create; ask the API server.
		if found, err = get(ctx, sc.Infra().APIReader, key, vm); err != nil {
			return outcome.Outcome{}, true, err
		}
		if !found {
			setBootstrap(km, metav1.ConditionFalse, infrav1.VirtualMachineDeletedReason, "the VirtualMachine is gone")
			markNotProvisioned(km)
			return s.recordVM(km, outcome.Fail(infrav1.VirtualMachineDeletedReason, fmt.Sprintf(
				"VirtualMachine %s was deleted outside the provider; the machine is not recreated with a new identity, delete the Machine (a MachineHealthCheck does) to replace it", key))), true, nil
		}
	}
	if !found {
		o, err := s.create(ctx, sc, key)
		if err != nil {
			if o.Reason != "" {
				s.recordVM(km, o)
			}
			return outcome.Outcome{}, true, err
		}
		return s.recordVM(km, o), true, nil
	}
	if !s.ours(km, vm) {
		return s.recordVM(km, outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"VirtualMachine %s exists but was not created for this KubevirtMachine; rename or remove it", key))), true, nil
	}
	if km.Spec.ProviderID == nil {
		km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	}
	r.vm = vm
	return outcome.Outcome{}, false, nil
}

// reconcileUserData keeps the VM's user data Secret (keepUserData); a
// pool's VMs share their pool's.
func (s *Service) reconcileUserData(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	if sc.PoolVMUID() != "" {
		return outcome.Outcome{}, false, nil
	}
	if o, err := s.keepUserData(ctx, sc, r.vm); err != nil || !o.IsDone() {
		return s.recordVM(sc.KubevirtMachine, o), true, err
	}
	return outcome.Outcome{}, false, nil
}

// reconcileInstance reads the VM's instance and acts on it: a requested
// restart, KubeVirt's live migration state, an evacuation off a draining
// infra node.
func (s *Service) reconcileInstance(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	km := sc.KubevirtMachine
	infra := sc.Infra()
	candidate := &kubevirtv1.VirtualMachineInstance{}
	found, err := get(ctx, infra.Client, client.ObjectKeyFromObject(r.vm), candidate)
	if err != nil {
		return outcome.Outcome{}, true, err
	}
	if found {
		r.vmi = candidate
	}
	if _, err := s.restartIfRequested(ctx, sc, r.vm, r.vmi); err != nil {
		return outcome.Outcome{}, true, err
	}
	s.Evacuation.RecordMigration(km, r.vmi)
	r.requeue, err = s.Evacuation.Step(ctx, &evacuation.Target{
		KubevirtMachine: km, Machine: sc.Machine, Cluster: sc.Cluster, Infra: infra,
		DeleteInstance: func(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
			return s.deleteInstance(ctx, sc, vmi)
		},
	}, r.vm, r.vmi)
	return outcome.Outcome{}, err != nil, err
}

// reconcileReport reports the VM's state and runs the bootstrap check; it
// always ends the reconcile.
func (s *Service) reconcileReport(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	o, err := s.report(ctx, sc, r.vm, r.vmi)
	return o.After(outcome.Sooner(o.RequeueAfter, r.requeue)), true, err
}

func provisioned(km *infrav1.KubevirtMachine) bool {
	return ptr.Deref(km.Status.Initialization.Provisioned, false)
}

// vmCreated reports whether the stored status shows that the machine's VM
// was created: BootstrapSucceeded is set only from then on. Before the
// status says so, a VM that is not found is created (again): it never
// provisioned, so no Node can have taken its identity.
func vmCreated(km *infrav1.KubevirtMachine) bool {
	return provisioned(km) || conditions.Has(km, infrav1.BootstrapSucceededCondition)
}

// report reads the VM's disks and instance into VirtualMachineReady and
// runs the bootstrap check once the instance runs.
func (s *Service) report(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	infra := sc.Infra()
	var dvs []*cdiv1.DataVolume
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, infra.Client, types.NamespacedName{Namespace: vm.Namespace, Name: t.Name}, dv)
		if err != nil {
			return outcome.Outcome{}, err
		}
		if found {
			dvs = append(dvs, dv)
		}
	}
	if golden.Needed(km.Spec.RootDisk) {
		km.Status.GoldenImage = golden.StatusOf(infra.Secret, sc.VMNamespace(), km.Spec.RootDisk)
	}
	// A pool's VMs clone the golden volume their pool keeps.
	if golden.Needed(km.Spec.RootDisk) && !rootDiskCloned(vm, dvs) && sc.PoolVMUID() == "" {
		if err := s.ensureGoldenVolume(ctx, sc); err != nil {
			return outcome.Outcome{}, err
		}
	}
	state := vmstatus.Of(vm, vmi, dvs)
	if err := guardrails.RetryRefused(ctx, infra, vmi, dvs); err != nil {
		// The refusal is reported either way; KubeVirt and CDI then retry
		// on their own backoff (docs/operations.md#quota).
		ctrl.LoggerFrom(ctx).Info("Cannot ask for a retry of what a quota refused", "error", err.Error())
	}
	nodeNetwork := ""
	if vmi != nil {
		nodeNetwork = vmstatus.NodeNetwork(vmi, tenantnet.NodeAddressNetwork(sc.KubevirtCluster, km))
		if names := vmstatus.NetworkNames(vmi); !slices.Contains(names, nodeNetwork) {
			state = vmstatus.State{Running: state.Running, Reason: infrav1.NodeNetworkNotFoundReason, Warning: true,
				Message: fmt.Sprintf("nodeAddressNetwork %q is not a network of the VM; it has %v", nodeNetwork, names)}
		} else if state.Ready && !vmstatus.HasNodeAddress(vmi, nodeNetwork) {
			// KubeVirt can report an interface before its IP
			// (docs/kubevirt-behaviour.md#interface-status-and-ip-addresses).
			state = vmstatus.State{Running: true, Reason: infrav1.BootingReason,
				Message: fmt.Sprintf("VM instance is ready but network %q has no IP address yet", nodeNetwork)}
		}
		if state.Running {
			km.Status.Addresses = toMachineAddresses(vmstatus.Addresses(vmi, nodeNetwork))
		}
	}
	vmOutcome := s.recordVM(km, fromState(state))
	if vmi != nil && vmi.Status.NodeName != "" {
		km.Status.FailureDomain = sc.failureDomain()
	}
	if !state.Running {
		setBootstrap(km, metav1.ConditionFalse, infrav1.WaitingForBootstrapReason, "waiting for the VM instance to run")
		markNotProvisioned(km)
		return vmOutcome, nil
	}
	check := s.checkBootstrap(ctx, sc, vmi, state)
	if !check.IsDone() || !state.Ready {
		check = check.After(outcome.Sooner(check.RequeueAfter, s.reportNodeJoin(sc, vmi, "").RequeueAfter))
		markNotProvisioned(km)
		if vmOutcome.IsDone() {
			return check, nil
		}
		return vmOutcome.After(check.RequeueAfter), nil
	}
	if !provisioned(km) && s.Status.FirstProvisioned(km, cloneMethod(vm, dvs), time.Now()) {
		s.Recorder.Eventf(km, vmi, corev1.EventTypeNormal, "Provisioned", "ProvisionVirtualMachine",
			"VirtualMachine %s/%s on the %s runs and its bootstrap succeeded", vm.Namespace, vm.Name, sc.Infra().Description())
	}
	km.Status.Ready = true
	km.Status.Initialization.Provisioned = ptr.To(true)
	// The Node is usually there by now (kubeadm join finished before the
	// bootstrap succeeded), so that NodeJoined goes with the same write.
	node, err := s.syncTenantNode(ctx, sc, vmi)
	if err != nil {
		return outcome.Outcome{}, err
	}
	return check.After(outcome.Sooner(check.RequeueAfter, s.reportNodeJoin(sc, vmi, node).RequeueAfter)), nil
}

// fromState is the outcome of a VM state read from KubeVirt and CDI.
func fromState(st vmstatus.State) outcome.Outcome {
	switch {
	case st.Ready:
		return outcome.Ready(st.Reason, st.Message)
	case st.Warning:
		return outcome.Fail(st.Reason, st.Message)
	}
	return outcome.Wait(st.Reason, st.Message)
}

// cloneMethod is how CDI cloned the VM's root disk from its golden volume,
// as CDI notes it on the DataVolume: snapshot, csi-clone or copy
// (host-assisted); empty when the disk was not cloned.
func cloneMethod(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) string {
	if dv := rootDataVolume(vm, dvs); dv != nil {
		return dv.Annotations[cloneTypeAnnotation]
	}
	return ""
}

// cloneTypeAnnotation is where CDI records the clone strategy it used
// (its DataVolume clone controller's annCloneType).
const cloneTypeAnnotation = "cdi.kubevirt.io/cloneType"

// rootDiskCloned reports whether the VM's root DataVolume finished.
func rootDiskCloned(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) bool {
	dv := rootDataVolume(vm, dvs)
	return dv != nil && dv.Status.Phase == cdiv1.Succeeded
}

// rootDataVolume is the VM's root disk DataVolume among dvs, or nil.
func rootDataVolume(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) *cdiv1.DataVolume {
	name := vmbuilder.DataVolumeName(vm.Name, golden.RootDiskName)
	for _, dv := range dvs {
		if dv.Name == name {
			return dv
		}
	}
	return nil
}

func (sc *Scope) failureDomain() string {
	if sc.Machine != nil {
		return sc.Machine.Spec.FailureDomain
	}
	return ""
}

// create writes the VM and its user data Secret, once the golden image,
// the bootstrap data and the clone permission are there. The outcome says
// what it waits for.
func (s *Service) create(ctx context.Context, sc *Scope, key types.NamespacedName) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	infra := sc.Infra()
	if refused, err := s.guestAllowed(ctx, sc, key.Namespace); err != nil || refused.Reason != "" {
		return refused, err
	}
	// The import starts before bootstrap data exists: workers get theirs
	// only once the control plane is up, and the download need not wait.
	goldenVolume, wait, err := s.goldenVolume(ctx, sc)
	if err != nil {
		return wait, err
	}
	if goldenVolume == nil && golden.Needed(km.Spec.RootDisk) {
		// A worker waits for its control plane longer than for the
		// import: that is the wait to show, unless the import failed.
		if sc.Machine.Spec.Bootstrap.DataSecretName == nil && wait.State != outcome.Failed {
			return bootstrapdata.Waiting("Machine"), nil
		}
		return wait, nil
	}
	if !sc.FinalizerStored {
		// Nothing that could outlive the machine is created before its
		// finalizer is stored; the write of the finalizer brings it back.
		if sc.Machine.Spec.Bootstrap.DataSecretName == nil {
			return bootstrapdata.Waiting("Machine"), nil
		}
		return outcome.Wait(infrav1.PendingReason, "the VirtualMachine is created once the machine's finalizer is stored"), nil
	}
	data, wait, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return wait, err
	}
	if wait, err := guardrails.CloneAuthorized(ctx, infra, km, sc.VMNamespace(), s.recheck()); err != nil || !wait.IsDone() {
		return wait, err
	}
	numa, unsupported, err := s.presetSupport(ctx, sc)
	if err != nil || unsupported.Reason != "" {
		return unsupported, err
	}
	in := vmbuilder.Input{
		Name: key.Name, Namespace: key.Namespace, Spec: km.Spec, KubevirtMachineNamespace: km.Namespace,
		ClusterName: sc.Cluster.Name, MachineName: sc.Machine.Name,
		MachineDeployment: sc.Machine.Labels[clusterv1.MachineDeploymentNameLabel],
		ControlPlane:      util.IsControlPlaneMachine(sc.Machine), FailureDomain: sc.Machine.Spec.FailureDomain,
		UserDataSecret: sc.UserDataSecretName(), Format: data.Format,
		HasNetworkData: data.NetworkData != nil || (len(data.assigned) > 0 && data.Format != userdata.FormatIgnition),
		GoldenVolume:   goldenVolume, NUMAPassthrough: numa, InterfaceMAC: interfaceMAC(sc),
	}
	if sc.KubevirtCluster != nil {
		kc := sc.KubevirtCluster
		in.FailureDomainSelector = failuredomains.Selector(kc.Spec.FailureDomains, in.FailureDomain)
		in.ClusterNetworks = tenantnet.ClusterNetworks(kc, infra.Namespace)
		in.DNSPolicy, in.DNSConfig = kc.Spec.DNSPolicy, kc.Spec.DNSConfig
	}
	if !infra.External && key.Namespace == km.Namespace {
		// An owner in another namespace counts as missing for the garbage
		// collector, which would delete the VM at once.
		in.Owner = metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine"))
	}
	vm, err := vmbuilder.Build(in)
	if err != nil {
		return outcome.Fail(infrav1.CreateFailedReason, err.Error()), nil
	}
	if o := guestNetwork(sc, data, vm, true); o.Reason != "" {
		return o, nil
	}
	if conflict, err := s.userDataConflict(ctx, sc); err != nil || conflict.State == outcome.Failed {
		return conflict, err
	}
	if err := infra.Client.Create(ctx, vm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Ours, created by an earlier reconcile the cache has not seen
			// yet: its watch event follows.
			return outcome.Wait(infrav1.PendingReason, fmt.Sprintf("VirtualMachine %s exists, waiting for its status", key)), nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			return outcome.Fail(infrav1.CreateFailedReason, "the infra cluster refused the VirtualMachine: "+err.Error()), nil
		}
		// The infra API server failed (a webhook of KubeVirt's down, an
		// etcd timeout): the machine says so, and the error brings it back
		// with the controller's bounded backoff. The message stays the same
		// from one retry to the next, and so costs no write.
		err = fmt.Errorf("creating VirtualMachine %s: %w", key, err)
		return outcome.Fail(infrav1.CreateFailedReason, "retrying with backoff: "+err.Error()), err
	}
	// No Event here: the Provisioned Event names the VM and its infra
	// cluster, and an Event per machine for a step the condition shows
	// anyway is a write per machine (docs/machines.md).
	km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	setBootstrap(km, metav1.ConditionFalse, infrav1.WaitingForBootstrapReason, "waiting for the VM instance to run")
	markNotProvisioned(km)
	// The Secret follows the VM, so that it is created with its owner and
	// never written twice; the instance's pod mounts it and waits for it
	// (docs/kubevirt-behaviour.md#cloud-init-secret-keys).
	if o, err := s.ensureUserDataSecret(ctx, sc, data, vm); err != nil || !o.IsDone() {
		return o, err
	}
	return outcome.Wait(infrav1.PendingReason, "VirtualMachine created, waiting for KubeVirt"), nil
}

// recordVM sets the VirtualMachineReady condition from o, with an Event
// when it changes, and returns o.
func (s *Service) recordVM(km *infrav1.KubevirtMachine, o outcome.Outcome) outcome.Outcome {
	outcome.RecordWarning(s.Recorder, km, infrav1.VirtualMachineReadyCondition, o)
	return o
}

// reportNodeJoin sets NodeJoined from the tenant Node found with the
// machine's providerID (node, empty when none), else the Machine's nodeRef,
// and how long the instance has run.
func (s *Service) reportNodeJoin(sc *Scope, vmi *kubevirtv1.VirtualMachineInstance, node string) outcome.Outcome {
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
	outcome.RecordWarning(s.Recorder, sc.KubevirtMachine, infrav1.NodeJoinedCondition, o)
	return o
}

func setBootstrap(km *infrav1.KubevirtMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(km, metav1.Condition{Type: infrav1.BootstrapSucceededCondition, Status: status, Reason: reason, Message: message})
}

func markNotProvisioned(km *infrav1.KubevirtMachine) {
	// Once provisioned, a machine stays provisioned for CAPI (the contract
	// does not go back); readiness is carried by the Ready condition.
	if !provisioned(km) {
		km.Status.Ready = false
	}
}

func toMachineAddresses(in []vmstatus.Address) []clusterv1.MachineAddress {
	out := make([]clusterv1.MachineAddress, 0, len(in))
	for _, a := range in {
		out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address})
	}
	return out
}

// get reads an object, reporting NotFound as found=false.
func get(ctx context.Context, r client.Reader, key types.NamespacedName, obj client.Object) (bool, error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

// recheck is the wait before checking again what no event announces: an
// SSH bootstrap check, a clone permission.
func (s *Service) recheck() time.Duration { return outcome.Recheck(s.RecheckAfter) }

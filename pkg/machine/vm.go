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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

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
			return r.found.vmGone(fmt.Sprintf(
				"VirtualMachine %s was deleted outside the provider; the machine is not recreated with a new identity, delete the Machine (a MachineHealthCheck does) to replace it", key)), true, nil
		}
	}
	if !found {
		o, err := s.create(ctx, sc, key, &r.found)
		if err != nil {
			if o.Reason != "" {
				r.found.vm = &o
			}
			return outcome.Outcome{}, true, err
		}
		r.found.vm = &o
		return o, true, nil
	}
	if !s.ours(km, vm) {
		o := outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"VirtualMachine %s exists but was not created for this KubevirtMachine; rename or remove it", key))
		r.found.vm = &o
		return o, true, nil
	}
	if km.Spec.ProviderID == nil {
		km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	}
	r.vm = vm
	return outcome.Outcome{}, false, nil
}

// vmCreated reports whether the stored status shows that the machine's VM
// was created: BootstrapSucceeded is set only from then on. Before the
// status says so, a VM that is not found is created (again): it never
// provisioned, so no Node can have taken its identity.
func vmCreated(km *infrav1.KubevirtMachine) bool {
	return provisioned(km) || conditions.Has(km, infrav1.BootstrapSucceededCondition)
}

// create writes the VM and its user data Secret, once the golden image,
// the bootstrap data and the clone permission are there. The outcome says
// what it waits for.
func (s *Service) create(ctx context.Context, sc *Scope, key types.NamespacedName, found *findings) (outcome.Outcome, error) {
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
	if goldenVolume == nil && goldenplan.Needed(km.Spec.RootDisk) {
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
	if wait, err := goldenkeeper.CloneAuthorized(ctx, infra, km, sc.VMNamespace(), s.recheck()); err != nil || !wait.IsDone() {
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
	found.waitForInstance()
	// The Secret follows the VM, so that it is created with its owner and
	// never written twice; the instance's pod mounts it and waits for it
	// (docs/kubevirt-behaviour.md#cloud-init-secret-keys).
	if o, err := s.ensureUserDataSecret(ctx, sc, data, vm); err != nil || !o.IsDone() {
		return o, err
	}
	return outcome.Wait(infrav1.PendingReason, "VirtualMachine created, waiting for KubeVirt"), nil
}

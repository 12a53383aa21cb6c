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

package inplace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
)

// Hooks answers Cluster API's in-place update hooks for KubevirtMachines
// (docs/in-place-updates.md). The answers to the two CanUpdate hooks come
// from the specs (Decide) and from whether the running VMs can take a
// hot-plug, which KubeVirt carries by live migration; UpdateMachine
// reports the InPlaceUpdated condition the machine controller keeps.
type Hooks struct {
	// Client reads Machines and KubevirtMachines of the management
	// cluster.
	Client client.Reader
	// APIReader reads MachineSets from the API server, to check a
	// request's against the stored one: the provider watches none. Unset,
	// Client reads them.
	APIReader client.Reader
	// Targets, when set, says whether another infra node could take a
	// VM's live migration.
	Targets Targets
	// Claims says whether a machine's disks can grow. Unset, no disk
	// grows in place: the provider cannot tell whether it would.
	Claims Claims
}

// UpdateRetry is how soon Cluster API asks UpdateMachine again while the
// VM is being updated: its Machine controller has no watch on the
// KubevirtMachine to tell it sooner.
const UpdateRetry = 5 * time.Second

// CanUpdateMachineSet answers Cluster API's CanUpdateMachineSet hook with
// the part of a MachineDeployment's change the provider can make in place,
// as a patch of the current KubevirtMachineTemplate. The MachineSet's and
// the bootstrap template's changes are not the provider's to cover; a
// change it cannot cover is left out, so Cluster API rolls the machines
// as before.
func (h *Hooks) CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	if ours, err := decode(req.Current.InfrastructureMachineTemplate, "KubevirtMachineTemplate", "current", &infrav1.KubevirtMachineTemplate{}); err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachineTemplate")
		return
	}
	reader := h.APIReader
	if reader == nil {
		reader = h.Client
	}
	if err := storedMachineSet(ctx, reader, &req.Current.MachineSet); err != nil {
		answer(&resp.CommonResponse, err, "")
		return
	}
	var machines []clusterv1.Machine
	listed := func() ([]clusterv1.Machine, error) {
		if machines != nil {
			return machines, nil
		}
		ms := &req.Current.MachineSet
		list := &clusterv1.MachineList{}
		if err := h.Client.List(ctx, list, client.InNamespace(ms.Namespace),
			client.MatchingLabels{clusterv1.MachineSetNameLabel: format.MustFormatValue(ms.Name)}); err != nil {
			return nil, fmt.Errorf("listing the machines of MachineSet %s: %w", ms.Name, err)
		}
		machines = list.Items
		return machines, nil
	}
	answerMachineSet(req, resp, h.checks(ctx, listed))
	ctrl.LoggerFrom(ctx).Info("Answered CanUpdateMachineSet", "MachineSet", klog.KObj(&req.Current.MachineSet),
		"status", resp.Status, "answer", resp.Message)
}

// answerMachineSet is CanUpdateMachineSet's answer; checks say why the
// machines cannot take some changes.
func answerMachineSet(req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse, checks Checks) {
	current, desired := &infrav1.KubevirtMachineTemplate{}, &infrav1.KubevirtMachineTemplate{}
	ours, err := decodeBoth(req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate, "KubevirtMachineTemplate", current, desired)
	if err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachineTemplate")
		return
	}
	patch, message, err := plan(&current.Spec.Template.Spec, &desired.Spec.Template.Spec,
		req.Current.InfrastructureMachineTemplate.Raw, req.Desired.InfrastructureMachineTemplate.Raw, checks, TemplateSpecPath)
	resp.InfrastructureMachineTemplatePatch = patch
	answer(&resp.CommonResponse, err, message)
}

// CanUpdateMachine answers Cluster API's CanUpdateMachine hook (a
// KubeadmControlPlane's machines) the same way, as a patch of the current
// KubevirtMachine.
func (h *Hooks) CanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	current := &infrav1.KubevirtMachine{}
	if ours, err := decode(req.Current.InfrastructureMachine, "KubevirtMachine", "current", current); err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachine")
		return
	}
	if err := sameMachine(ctx, h.Client, &req.Current.Machine, current.Namespace, current.Name); err != nil {
		answer(&resp.CommonResponse, err, "")
		return
	}
	answerMachine(req, resp, h.checks(ctx, func() ([]clusterv1.Machine, error) {
		return []clusterv1.Machine{req.Current.Machine}, nil
	}))
	ctrl.LoggerFrom(ctx).Info("Answered CanUpdateMachine", "Machine", klog.KObj(&req.Current.Machine),
		"status", resp.Status, "answer", resp.Message)
}

// answerMachine is CanUpdateMachine's answer; checks as for
// answerMachineSet.
func answerMachine(req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse, checks Checks) {
	current, desired := &infrav1.KubevirtMachine{}, &infrav1.KubevirtMachine{}
	ours, err := decodeBoth(req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, "KubevirtMachine", current, desired)
	if err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachine")
		return
	}
	patch, message, err := plan(&current.Spec, &desired.Spec,
		req.Current.InfrastructureMachine.Raw, req.Desired.InfrastructureMachine.Raw, checks, MachineSpecPath)
	resp.InfrastructureMachinePatch = patch
	answer(&resp.CommonResponse, err, message)
}

// checks are the hooks' checks of the machines listed reports.
func (h *Hooks) checks(ctx context.Context, listed func() ([]clusterv1.Machine, error)) Checks {
	return Checks{
		NoHotplug: func() (string, error) {
			machines, err := listed()
			if err != nil {
				return "", err
			}
			return h.unmovable(ctx, machines)
		},
		NoGrowth: func(disks map[string]resource.Quantity) (string, error) {
			machines, err := listed()
			if err != nil {
				return "", err
			}
			return h.ungrowable(ctx, machines, disks)
		},
	}
}

// machineCheck says why a machine's running VM cannot take a change,
// empty when it can; cluster reads the machine's KubevirtCluster.
type machineCheck func(m *clusterv1.Machine, km *infrav1.KubevirtMachine, cluster func() (*infrav1.KubevirtCluster, error)) (string, error)

// firstRefusal runs check on every machine of the provider's, in order,
// and returns the first reason it gives. The machines are of one Cluster,
// whose KubevirtCluster is read once, when needed.
func (h *Hooks) firstRefusal(ctx context.Context, machines []clusterv1.Machine, check machineCheck) (string, error) {
	var kc *infrav1.KubevirtCluster
	for i := range machines {
		m := &machines[i]
		ref := m.Spec.InfrastructureRef
		if ref.Kind != "KubevirtMachine" || ref.APIGroup != infrav1.GroupVersion.Group {
			continue
		}
		km := &infrav1.KubevirtMachine{}
		if err := h.Client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}, km); err != nil {
			return "", fmt.Errorf("reading KubevirtMachine %s: %w", ref.Name, err)
		}
		why, err := check(m, km, func() (*infrav1.KubevirtCluster, error) {
			var err error
			if kc == nil {
				kc, err = kubevirtCluster(ctx, h.Client, m.Namespace, m.Spec.ClusterName)
			}
			return kc, err
		})
		if why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// unmovable says why some of the machines' VMs cannot take a hot-plug:
// KubeVirt carries one by live migration, and their LiveMigratable
// condition says the VM cannot migrate, or no other infra node can take
// it. Empty when all can; a machine whose VM has not reported yet counts
// as unknown, and so as unable.
func (h *Hooks) unmovable(ctx context.Context, machines []clusterv1.Machine) (string, error) {
	return h.firstRefusal(ctx, machines, func(m *clusterv1.Machine, km *infrav1.KubevirtMachine, clusterOf func() (*infrav1.KubevirtCluster, error)) (string, error) {
		switch c := conditions.Get(km, infrav1.LiveMigratableCondition); {
		case c == nil:
			return fmt.Sprintf("KubeVirt hot-plugs by live migration, and machine %s has not reported whether its VM can migrate", m.Name), nil
		case c.Status != metav1.ConditionTrue:
			return fmt.Sprintf("KubeVirt hot-plugs by live migration, and the VM of machine %s cannot migrate: %s", m.Name, c.Message), nil
		}
		if h.Targets != nil {
			cluster, err := clusterOf()
			if err != nil {
				return "", err
			}
			why, err := h.Targets.NoTarget(ctx, cluster, km)
			if why != "" || err != nil {
				return prefixed(fmt.Sprintf("KubeVirt hot-plugs by live migration, and for the VM of machine %s ", m.Name), why), err
			}
		}
		if !util.IsControlPlaneMachine(m) || km.Spec.NodeAddressNetwork != "" {
			return "", nil
		}
		cluster, err := clusterOf()
		if err != nil {
			return "", err
		}
		// A Node reached at its pod network address, which belongs to the
		// launcher pod, gets another with a live migration
		// (docs/kubevirt-behaviour.md#live-migration).
		if tenantnet.NodeAddressNetwork(cluster, km) == "" {
			return fmt.Sprintf("KubeVirt hot-plugs by live migration, which gives control-plane machine %s a new pod network address, "+
				"the address etcd and the API server advertise; control planes grow in place only with nodeAddressNetwork on a Multus network", m.Name), nil
		}
		return "", nil
	})
}

// ungrowable says why the disks of some of the machines' VMs cannot grow
// to the sizes given while they run; empty when all can.
func (h *Hooks) ungrowable(ctx context.Context, machines []clusterv1.Machine, disks map[string]resource.Quantity) (string, error) {
	if h.Claims == nil {
		return "the provider cannot check the infra cluster's storage classes here", nil
	}
	return h.firstRefusal(ctx, machines, func(m *clusterv1.Machine, km *infrav1.KubevirtMachine, clusterOf func() (*infrav1.KubevirtCluster, error)) (string, error) {
		cluster, err := clusterOf()
		if err != nil {
			return "", err
		}
		why, err := h.Claims.NoGrowth(ctx, cluster, km, disks)
		return prefixed(fmt.Sprintf("for the VM of machine %s, ", m.Name), why), err
	})
}

// prefixed is why with prefix, or empty when why is.
func prefixed(prefix, why string) string {
	if why == "" {
		return ""
	}
	return prefix + why
}

// kubevirtCluster reads the KubevirtCluster of the named Cluster.
func kubevirtCluster(ctx context.Context, c client.Reader, namespace, clusterName string) (*infrav1.KubevirtCluster, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: clusterName}, cluster); err != nil {
		return nil, fmt.Errorf("reading Cluster %s: %w", clusterName, err)
	}
	kc := &infrav1.KubevirtCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: cluster.Spec.InfrastructureRef.Name}, kc); err != nil {
		return nil, fmt.Errorf("reading KubevirtCluster %s: %w", cluster.Spec.InfrastructureRef.Name, err)
	}
	return kc, nil
}

// UpdateMachine answers Cluster API's UpdateMachine hook from the
// machine's InPlaceUpdated condition, once it speaks of the spec Cluster
// API wrote: done when True, a failure with KubeVirt's reason when the
// update failed, else to be asked again.
func (h *Hooks) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	desired := &infrav1.KubevirtMachine{}
	ours, err := decode(req.Desired.InfrastructureMachine, "KubevirtMachine", "desired", desired)
	if err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachine")
		return
	}
	if err := sameMachine(ctx, h.Client, &req.Desired.Machine, desired.Namespace, desired.Name); err != nil {
		answer(&resp.CommonResponse, err, "")
		return
	}
	km := &infrav1.KubevirtMachine{}
	if err := h.Client.Get(ctx, client.ObjectKeyFromObject(desired), km); err != nil {
		answer(&resp.CommonResponse, fmt.Errorf("reading KubevirtMachine %s: %w", desired.Name, err), "")
		return
	}
	c := conditions.Get(km, infrav1.InPlaceUpdatedCondition)
	switch {
	case c == nil || c.ObservedGeneration < km.Generation:
		resp.RetryAfterSeconds = int32(UpdateRetry / time.Second)
		answer(&resp.CommonResponse, nil, "waiting for the provider to apply the change to the VM")
	case c.Status == metav1.ConditionTrue:
		answer(&resp.CommonResponse, nil, c.Message)
	case c.Reason == infrav1.InPlaceUpdateFailedReason:
		answer(&resp.CommonResponse, errors.New(c.Message), "")
	default:
		resp.RetryAfterSeconds = int32(UpdateRetry / time.Second)
		answer(&resp.CommonResponse, nil, c.Message)
	}
}

// decodeBoth reads the current and desired objects into current and
// desired, and reports false when they are not of kind: another
// provider's, nothing for this one to cover.
func decodeBoth(currentRaw, desiredRaw runtime.RawExtension, kind string, current, desired any) (bool, error) {
	ours, err := decode(currentRaw, kind, "current", current)
	if err != nil || !ours {
		return false, err
	}
	return decode(desiredRaw, kind, "desired", desired)
}

// decode reads raw into obj if it is of kind (false if not); what names
// it in an error.
func decode(raw runtime.RawExtension, kind, what string, obj any) (bool, error) {
	meta := metav1.TypeMeta{}
	if err := json.Unmarshal(raw.Raw, &meta); err != nil {
		return false, fmt.Errorf("reading the %s infrastructure object: %w", what, err)
	}
	if meta.Kind != kind || meta.GroupVersionKind().Group != infrav1.GroupVersion.Group {
		return false, nil
	}
	if err := json.Unmarshal(raw.Raw, obj); err != nil {
		return false, fmt.Errorf("reading the %s %s: %w", what, kind, err)
	}
	return true, nil
}

// Checks say why the running VMs of the machines being asked about cannot
// take a hot-plug, or grow the named disks; empty when they can.
type Checks struct {
	NoHotplug func() (string, error)
	NoGrowth  func(disks map[string]resource.Quantity) (string, error)
}

// plan decides and patches, and says what it covers and leaves out. It
// runs a check only when the change needs it. A change covered whole gets
// the patch of the raw objects (WholePatch), else the patch of what is
// covered.
func plan(current, desired *infrav1.KubevirtMachineSpec, currentRaw, desiredRaw []byte, checks Checks, path []string) (runtimehooksv1.Patch, string, error) {
	p := Decide(current, desired)
	var limits Limits
	var err error
	// A check the caller has not got refuses: a claim the provider cannot
	// finish is not made.
	switch {
	case !hotplugs(current, &p.Covered):
	case checks.NoHotplug == nil:
		limits.NoHotplug = "the provider cannot check the running VMs here"
	default:
		if limits.NoHotplug, err = checks.NoHotplug(); err != nil {
			return runtimehooksv1.Patch{}, "", err
		}
	}
	switch grown := GrownDisks(current, &p.Covered); {
	case len(grown) == 0:
	case checks.NoGrowth == nil:
		limits.NoGrowth = "the provider cannot check the infra cluster's claims here"
	default:
		if limits.NoGrowth, err = checks.NoGrowth(grown); err != nil {
			return runtimehooksv1.Patch{}, "", err
		}
	}
	if limits != (Limits{}) {
		p = DecideFor(current, desired, limits)
	}
	var patch []byte
	if p.Complete() {
		patch, err = WholePatch(currentRaw, desiredRaw, path)
	} else {
		patch, err = Patch(current, &p.Covered, path)
	}
	if err != nil {
		return runtimehooksv1.Patch{}, "", err
	}
	parts := []string{}
	if len(p.Changes) > 0 {
		parts = append(parts, "in place: "+strings.Join(p.Changes, "; "))
	}
	if len(p.Declined) > 0 {
		parts = append(parts, "needs new machines: "+strings.Join(p.Declined, "; "))
	}
	if len(parts) == 0 {
		parts = append(parts, "no change of the machine spec")
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: patch}, strings.Join(parts, "; "), nil
}

// hotplugs says whether covered asks the running VM for other CPU sockets
// or guest memory than current.
func hotplugs(current, covered *infrav1.KubevirtMachineSpec) bool {
	a, b := WantOf(current), WantOf(covered)
	return a.Sockets != b.Sockets || (a.Guest == nil) != (b.Guest == nil) || (a.Guest != nil && a.Guest.Cmp(*b.Guest) != 0)
}

func answer(resp *runtimehooksv1.CommonResponse, err error, message string) {
	if err != nil {
		resp.Status, resp.Message = runtimehooksv1.ResponseStatusFailure, err.Error()
		return
	}
	resp.Status, resp.Message = runtimehooksv1.ResponseStatusSuccess, message
}

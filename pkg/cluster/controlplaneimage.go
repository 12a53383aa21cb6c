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

package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenkeeper"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// ControlPlaneRecheck is how often a cluster whose control plane object
// does not exist yet looks again: the provider does not watch control
// planes, whose kinds belong to other providers.
const ControlPlaneRecheck = 5 * time.Second

// GoldenImageRecheck is when a golden volume the infra API refused is
// tried again.
const GoldenImageRecheck = time.Minute

// reconcileControlPlaneImage starts the import of the golden image the
// control-plane machines will clone and waits for it. Cluster API's
// MachineHealthCheck counts a machine's node startup time from the latest
// of its creation and the cluster's InfrastructureReady (CAPI
// core/reconcilers/machinehealthcheck/machinehealthcheck_targets.go,
// nodeChecks), and KubeadmControlPlane creates no machine before the
// cluster's infrastructure is provisioned: holding the cluster here keeps
// a slow download out of that clock, so it cannot get the first
// control-plane machine replaced again and again. Like a machine, the
// cluster names the volume in its status, which keeps it in use, before it
// creates it, and checks the root disk against the multi-tenancy policy
// first: the template's image source is a tenant's instruction.
func (s *Service) reconcileControlPlaneImage(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra) (outcome.Outcome, error) {
	o, err := s.awaitControlPlaneImage(ctx, kc, cluster, infra)
	if o.State == "" {
		// An API error: the retry decides.
		o = outcome.Wait(infrav1.WaitingForGoldenImageReason, fmt.Sprintf("awaiting the control plane's golden image: %v", err))
	}
	return o, err
}

func (s *Service) awaitControlPlaneImage(ctx context.Context, kc *infrav1.KubevirtCluster, cluster *clusterv1.Cluster, infra *infracluster.Infra) (outcome.Outcome, error) {
	named := kc.Status.GoldenImage
	// Named only while waiting for it.
	kc.Status.GoldenImage = nil
	t, o, err := s.controlPlaneTemplate(ctx, cluster)
	if t == nil {
		return o, err
	}
	spec := &t.Spec.Template.Spec
	rd := spec.RootDisk
	switch {
	case !goldenplan.Needed(rd):
		return outcome.Ready(infrav1.NoGoldenImageReason,
			fmt.Sprintf("the control-plane machines of KubevirtMachineTemplate %s clone no golden image", t.Name)), nil
	case spec.InfraClusterSecretRef != nil || spec.IdentityRef != nil ||
		spec.VirtualMachineTemplate.ObjectMeta.Namespace != kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace:
		return outcome.Ready(infrav1.NotAwaitedReason, fmt.Sprintf(
			"KubevirtMachineTemplate %s names an infra cluster or namespace of its own; its machines import their golden image themselves", t.Name)), nil
	case !infra.Status.Available:
		// The infra API's return is announced (InfraClusterAvailable).
		return outcome.Wait(infrav1.WaitingForGoldenImageReason, "cannot import the control plane's golden image: "+infra.Status.Message), nil
	}
	refusal, err := tenancy.CheckVM(ctx, infra.APIReader, tenancy.VM{
		Spec: spec, ClusterNetworks: tenancy.NetworksOf(kc), Allow: infra.Guest,
		Namespace: infra.Namespace, TenantNamespace: kc.Namespace, ClusterName: cluster.Name,
		Path:   field.NewPath("KubevirtMachineTemplate", t.Name, "spec", "template", "spec"),
		Shared: tenancy.Shared(infra.Namespace, kc.Namespace, infra.External, infra.Secret.Namespace),
	})
	if refusal != nil || err != nil {
		return tenancy.Outcome(refusal, err, GoldenImageRecheck)
	}
	want := goldenplan.StatusOf(infra.Secret, infra.Namespace, rd)
	kc.Status.GoldenImage = want
	if !equality.Semantic.DeepEqual(named, want) {
		// Saved before the volume is touched, as the golden image
		// controller counts users from status; the write brings the
		// cluster back.
		return outcome.Wait(infrav1.WaitingForGoldenImageReason,
			fmt.Sprintf("using golden volume %s/%s for the control plane's machines", want.Namespace, want.Name)), nil
	}
	volume, o, err := goldenkeeper.Ensure(ctx, infra.Client, s.Recorder, kc, rd, infra.Namespace, GoldenImageRecheck)
	switch {
	case volume != nil:
		return outcome.Ready(infrav1.ImportedReason, fmt.Sprintf("golden volume %s holds %s for the control plane's machines (KubevirtMachineTemplate %s)",
			volume, goldenplan.Describe(&rd.Image), t.Name)), nil
	case o.Reason == infrav1.NameConflictReason:
		// Nothing announces the other DataVolume's removal.
		return o.After(GoldenImageRecheck), err
	case o.State == outcome.Waiting:
		// CDI's progress stays on the DataVolume: a status write per
		// percent would cost more than it tells.
		o.Message = fmt.Sprintf("importing %s into golden volume %s/%s before the control plane's machines are created (KubevirtMachineTemplate %s); its DataVolume shows the progress",
			goldenplan.Describe(&rd.Image), want.Namespace, want.Name, t.Name)
	}
	// The control plane may be pointed at another template meanwhile.
	return o.After(outcome.Sooner(o.RequeueAfter, ControlPlaneRecheck*12)), err
}

// controlPlaneTemplate is the KubevirtMachineTemplate the Cluster's
// control plane makes its machines from; without one, the outcome says
// why.
func (s *Service) controlPlaneTemplate(ctx context.Context, cluster *clusterv1.Cluster) (*infrav1.KubevirtMachineTemplate, outcome.Outcome, error) {
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() {
		return nil, outcome.Ready(infrav1.NoGoldenImageReason, "the Cluster names no control plane"), nil
	}
	cp, err := external.GetObjectFromContractVersionedRef(ctx, s.Client, ref, cluster.Namespace)
	switch {
	case apierrors.IsNotFound(err):
		return nil, outcome.Wait(infrav1.WaitingForControlPlaneReason,
			fmt.Sprintf("waiting for %s %s to exist, to import its machines' golden image first", ref.Kind, ref.Name)).After(ControlPlaneRecheck), nil
	case apierrors.IsForbidden(err):
		return nil, outcome.Ready(infrav1.NotAwaitedReason,
			fmt.Sprintf("the provider may not read %s %s; its machines import their golden image themselves", ref.Kind, ref.Name)), nil
	case err != nil:
		return nil, outcome.Wait(infrav1.WaitingForControlPlaneReason, fmt.Sprintf("reading %s %s: %v", ref.Kind, ref.Name, err)), err
	}
	name, ok := KubevirtMachineTemplateOf(cp)
	if !ok {
		return nil, outcome.Ready(infrav1.NoGoldenImageReason,
			fmt.Sprintf("%s %s names no KubevirtMachineTemplate for its machines", ref.Kind, ref.Name)), nil
	}
	t := &infrav1.KubevirtMachineTemplate{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: name}, t); err != nil {
		// Its creation wakes the cluster.
		return nil, outcome.Wait(infrav1.WaitingForGoldenImageReason,
			fmt.Sprintf("waiting for KubevirtMachineTemplate %s of %s %s", name, ref.Kind, ref.Name)), client.IgnoreNotFound(err)
	}
	return t, outcome.Outcome{}, nil
}

// KubevirtMachineTemplateOf is the name of the KubevirtMachineTemplate a
// control plane object makes its machines from: the Cluster API contract's
// spec.machineTemplate.spec.infrastructureRef (v1beta2), or
// spec.machineTemplate.infrastructureRef (v1beta1). It reports false for
// a control plane without machines or with another provider's template.
func KubevirtMachineTemplateOf(cp *unstructured.Unstructured) (string, bool) {
	ref, found, err := unstructured.NestedStringMap(cp.Object, "spec", "machineTemplate", "spec", "infrastructureRef")
	group := ref["apiGroup"]
	if err != nil || !found {
		ref, found, err = unstructured.NestedStringMap(cp.Object, "spec", "machineTemplate", "infrastructureRef")
		if err != nil || !found {
			return "", false
		}
		gv, err := schema.ParseGroupVersion(ref["apiVersion"])
		if err != nil {
			return "", false
		}
		group = gv.Group
	}
	if group != infrav1.GroupVersion.Group || ref["kind"] != "KubevirtMachineTemplate" || ref["name"] == "" {
		return "", false
	}
	return ref["name"], true
}

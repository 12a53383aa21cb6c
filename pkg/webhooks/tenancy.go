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

package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// placement asks the multi-tenancy policy whether an object in namespace
// ns may use the infra cluster src names and the namespace want names. It
// returns the grant and the infra namespace, or the refusal as field
// errors; a policy that could not be read is an internal error, so that
// nothing is admitted unchecked.
func placement(ctx context.Context, p *tenancy.Policy, ns string, src tenancy.Source, want tenancy.Request) (*tenancy.Grant, string, field.ErrorList, error) {
	if p == nil {
		p = &tenancy.Policy{}
	}
	grant, err := p.Decide(ctx, ns, src)
	if err != nil {
		return nil, "", refusalErrors(err), internal(err)
	}
	resolved, err := p.ResolvedNamespace(ctx, grant, ns)
	if err != nil {
		return nil, "", nil, apierrors.NewInternalError(err)
	}
	infraNS, err := grant.Namespace(resolved, want)
	if err != nil {
		return nil, "", refusalErrors(err), nil
	}
	return grant, infraNS, nil, nil
}

// refusalErrors is a refusal as field errors; nil for any other error.
func refusalErrors(err error) field.ErrorList {
	if r := tenancy.AsRefusal(err); r != nil {
		return field.ErrorList{r.FieldError()}
	}
	return nil
}

// internal is a non-refusal error as the API error admission returns.
func internal(err error) error {
	if err == nil || tenancy.IsRefusal(err) {
		return nil
	}
	return apierrors.NewInternalError(err)
}

// clusterTenancy checks a KubevirtCluster spec at path against the policy.
func clusterTenancy(ctx context.Context, p *tenancy.Policy, ns string, spec *infrav1.KubevirtClusterSpec, path *field.Path) (field.ErrorList, error) {
	grant, infraNS, errs, err := placement(ctx, p, ns, tenancy.ClusterSource(spec, path), tenancy.ClusterRequest(spec, path))
	if err != nil || errs != nil {
		return errs, err
	}
	var rs tenancy.Refusals
	allowed := append([]string{infraNS}, grant.Guest().NetworkNamespaces...)
	for _, n := range spec.Network.Networks {
		rs = append(rs, tenancy.Network(n.NetworkAttachmentDefinition, allowed, path.Child("network", "networks").Key(n.Name))...)
	}
	if r := tenancy.TenantCloud(spec.TenantCloud, sharedFor(grant, infraNS, ns), grant.Guest(), infraNS, path.Child("tenantCloud", "components")); r != nil {
		rs = append(rs, r)
	}
	return rs.FieldErrors(), nil
}

// sharedFor says whether the infra namespace a grant gives an object of
// namespace ns may hold others' objects (tenancy.Shared).
func sharedFor(grant *tenancy.Grant, infraNS, ns string) bool {
	if grant.SecretRef == nil {
		return tenancy.Shared(infraNS, ns, false, "")
	}
	return tenancy.Shared(infraNS, ns, true, grant.SecretRef.Namespace)
}

// machineTenancy checks a KubevirtMachine spec at path against the policy:
// where its VM goes and what the VM may mount, attach and carry. The
// KubevirtCluster's own networks are checked with it, and again by the
// controller with the machine's.
func machineTenancy(ctx context.Context, p *tenancy.Policy, obj client.Object, spec *infrav1.KubevirtMachineSpec, path *field.Path) (field.ErrorList, error) {
	kc, err := kubevirtClusterOf(ctx, p, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	grant, infraNS, errs, err := placement(ctx, p, obj.GetNamespace(), tenancy.MachineSource(spec, kc, path), tenancy.MachineRequest(spec, path))
	if err != nil || errs != nil {
		return errs, err
	}
	var networks []infrav1.MultusNetwork
	if kc != nil {
		networks = kc.Spec.Network.Networks
	}
	shared := sharedFor(grant, infraNS, obj.GetNamespace())
	refusals, named := tenancy.Guest(spec, networks, infraNS, shared, grant.Guest(), path)
	clusterName := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if len(refusals) > 0 || grant.SecretRef != nil || clusterName == "" || p == nil || p.Reader == nil {
		// What an external infra cluster holds, or what a template not
		// yet of a cluster names, the controller checks before it acts.
		return refusals.FieldErrors(), nil
	}
	refusal, err := tenancy.CheckOwned(ctx, p.Reader, infraNS, obj.GetNamespace(), clusterName, shared, named)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if refusal != nil {
		return field.ErrorList{refusal.FieldError()}, nil
	}
	return nil, nil
}

// kubevirtClusterOf is the KubevirtCluster of the Cluster an object names
// in its cluster-name label, whose infra cluster a machine without its own
// uses; nil when there is none (yet), and the machine is checked as using
// the defaults.
func kubevirtClusterOf(ctx context.Context, p *tenancy.Policy, obj client.Object) (*infrav1.KubevirtCluster, error) {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if p == nil || p.Reader == nil || name == "" {
		return nil, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cluster); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "KubevirtCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		return nil, nil
	}
	kc := &infrav1.KubevirtCluster{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, kc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return kc, nil
}

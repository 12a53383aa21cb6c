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

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// guestAllowed checks, before anything of the VM is created, what the
// machine's VM would mount, attach and carry against the multi-tenancy
// policy, as admission did: a webhook can be off, and the identity can
// have changed since. A refusal is a failed outcome naming the rule.
func (s *Service) guestAllowed(ctx context.Context, sc *Scope, vmNamespace string) (outcome.Outcome, error) {
	return s.vmAllowed(ctx, sc, &sc.KubevirtMachine.Spec, vmNamespace, field.NewPath("spec"))
}

// vmAllowed checks spec, a machine's or one made from a VM found on the
// infra cluster (adopt.go), against the multi-tenancy policy for a VM in
// vmNamespace; path prefixes the refused field.
func (s *Service) vmAllowed(ctx context.Context, sc *Scope, spec *infrav1.KubevirtMachineSpec, vmNamespace string, path *field.Path) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	refusal, err := tenancy.CheckVM(ctx, sc.Access.Infra.APIReader, tenancy.VM{
		Spec: spec, ClusterNetworks: tenancy.NetworksOf(sc.KubevirtCluster), Allow: sc.Access.Infra.Guest,
		Namespace: vmNamespace, TenantNamespace: km.Namespace, ClusterName: sc.Cluster.Name, Path: path,
		Shared: tenancy.Shared(vmNamespace, km.Namespace, sc.Access.Infra.External, sc.Access.Infra.Secret.Namespace),
	})
	return tenancy.Outcome(refusal, err, s.recheck())
}

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

package infracluster

import (
	"context"
	"time"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// RetryUnannounced is how long to wait before looking at an infra cluster
// again when nothing the provider watches would announce that it became
// usable: it is unreachable, external (its CRDs are not watched), or named
// by a Secret the object's controller does not watch.
const RetryUnannounced = 30 * time.Second

// Access is an infra cluster as an object may use it, and what every
// controller reports about it: the InfraClusterAvailable outcome, with a
// requeue only where no watch announces a change.
type Access struct {
	// Infra is the infra cluster; nil when its kubeconfig Secret could not
	// be used.
	Infra *Infra
	// Outcome is the InfraClusterAvailable condition to report.
	Outcome outcome.Outcome
}

// Available reports whether the infra cluster serves KubeVirt and CDI.
func (a Access) Available() bool { return a.Infra != nil && a.Outcome.IsDone() }

// Reachable reports whether the infra cluster's API answers, so that core
// objects (Services, NetworkPolicies, Secrets) can be used there even
// without KubeVirt or CDI.
func (a Access) Reachable() bool {
	return a.Infra != nil && a.Outcome.Reason != infrav1.InfraClusterUnreachableReason
}

// Open acquires the infra cluster src names for user, in the infra
// namespace want asks for (see Acquire), and decides what it may be used
// for.
func (c *Clients) Open(ctx context.Context, src tenancy.Source, ns string, want tenancy.Request, user User) Access {
	infra, err := c.Acquire(ctx, src, ns, want, user)
	access := decide(infra, err)
	name := metrics.ManagementCluster
	if infra != nil && infra.External {
		name = infra.Secret.String()
	}
	metrics.InfraClusterUsers.Set(user.metricsKey(), name, access.Outcome.Reason)
	return access
}

// decide is the one infra cluster policy of the provider:
//   - what the multi-tenancy policy refuses fails with NotAllowedByPolicy
//     and creates nothing;
//   - a kubeconfig Secret that is missing, incomplete or not allowed fails
//     with InfraClusterSecretInvalid, and is looked at again after
//     RetryUnannounced: only the KubevirtMachine controller watches Secrets;
//   - a Secret that could not be read, or an API that does not answer, fails
//     with InfraClusterUnreachable, and is tried again after
//     RetryUnannounced;
//   - missing KubeVirt or CDI APIs fail with KubeVirtNotInstalled or
//     CDINotInstalled: on the management cluster the CRD watch announces
//     the fix, an external one is asked again after RetryUnannounced;
//   - otherwise the infra cluster is available.
func decide(infra *Infra, err error) Access {
	switch {
	case err != nil && tenancy.IsRefusal(err):
		// Looked at again when an administrator changes an identity
		// (watched) and after RetryUnannounced for the namespaces an
		// identity selects by label.
		return Access{Outcome: outcome.Fail(infrav1.NotAllowedByPolicyReason, err.Error()).After(RetryUnannounced)}
	case err != nil && IsConfigError(err):
		return Access{Outcome: outcome.Fail(infrav1.InfraClusterSecretInvalidReason, err.Error()).After(RetryUnannounced)}
	case err != nil:
		return Access{Outcome: outcome.Fail(infrav1.InfraClusterUnreachableReason, err.Error()).After(RetryUnannounced)}
	case infra.Status.Available:
		return Access{Infra: infra, Outcome: outcome.Ready(infrav1.AvailableReason, infra.Status.Message)}
	case infra.Status.Reason == infrav1.InfraClusterUnreachableReason:
		return Access{Infra: infra, Outcome: outcome.Fail(infra.Status.Reason, infra.Status.Message).After(RetryUnannounced)}
	}
	missing := outcome.Fail(infra.Status.Reason, infra.Status.Message)
	if infra.External {
		missing = missing.After(RetryUnannounced)
	}
	return Access{Infra: infra, Outcome: missing}
}

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

package goldenkeeper

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
)

// CloneAuthorized checks, for a root disk cloned from an admin-provided PVC
// or DataSource in another namespace, that the VM's service account may
// clone from there. KubeVirt checks the same when it creates the VM's
// DataVolume, but only says so in an Event on the VM
// (docs/kubevirt-behaviour.md#cross-namespace-clones-are-authorized-for-the-vm-service-account); checking
// first gives the machine a clear condition instead of a silent wait.
//
// vmNS is the VM's namespace; recheck is when to look again at a refusal,
// as RBAC changes on the infra cluster are not watched.
func CloneAuthorized(ctx context.Context, infra *infracluster.Infra, km *infrav1.KubevirtMachine, vmNS string, recheck time.Duration) (outcome.Outcome, error) {
	rd := km.Spec.RootDisk
	allowed := outcome.Ready("", "")
	if rd == nil {
		return allowed, nil
	}
	var srcNS string
	switch {
	case rd.Image.PVC != nil:
		srcNS = rd.Image.PVC.Namespace
	case rd.Image.DataSource != nil:
		srcNS = rd.Image.DataSource.Namespace
	}
	if srcNS == "" || srcNS == vmNS {
		return allowed, nil
	}
	sa := serviceAccountOf(km)
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + vmNS + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + vmNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: srcNS, Verb: "create", Group: cdiv1.SchemeGroupVersion.Group, Resource: "datavolumes", Subresource: "source",
		},
	}}
	if err := infra.Client.Create(ctx, review); err != nil {
		return outcome.Outcome{}, fmt.Errorf("checking clone permission in namespace %s: %w", srcNS, err)
	}
	if review.Status.Allowed {
		return allowed, nil
	}
	// RBAC changes on the infra cluster are not watched.
	return outcome.Fail(infrav1.CloneNotAuthorizedReason, fmt.Sprintf(
		"service account %s/%s may not clone %s: grant it create on datavolumes/source (group cdi.kubevirt.io) in namespace %s",
		vmNS, sa, goldenplan.Describe(&rd.Image), srcNS)).After(recheck), nil
}

// serviceAccountOf is the service account KubeVirt checks clone permission
// for: the template's serviceAccountName, else its serviceAccount volume,
// else "default".
func serviceAccountOf(km *infrav1.KubevirtMachine) string {
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil {
		if t.Spec.ServiceAccountName != "" {
			return t.Spec.ServiceAccountName
		}
		for _, v := range t.Spec.Volumes {
			if v.ServiceAccount != nil && v.ServiceAccount.ServiceAccountName != "" {
				return v.ServiceAccount.ServiceAccountName
			}
		}
	}
	return "default"
}

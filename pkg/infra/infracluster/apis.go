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

// Package infracluster finds the infra cluster of a KubevirtCluster or
// KubevirtMachine (the management cluster itself, or an external cluster
// reached through a kubeconfig Secret) and checks that it serves the KubeVirt
// and CDI APIs the provider needs.
package infracluster

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// requiredAPI is one API group version and the resources of it the provider
// uses, with the condition reason reported when it is missing.
type requiredAPI struct {
	groupVersion string
	resources    []string
	product      string
	reason       string
}

var requiredAPIs = []requiredAPI{
	{
		groupVersion: "kubevirt.io/v1",
		resources:    []string{"virtualmachines", "virtualmachineinstances"},
		product:      "KubeVirt",
		reason:       infrav1.KubeVirtNotInstalledReason,
	},
	{
		groupVersion: "cdi.kubevirt.io/v1beta1",
		resources:    []string{"datavolumes"},
		product:      "CDI",
		reason:       infrav1.CDINotInstalledReason,
	},
}

// RequiredGroups are the API groups whose CustomResourceDefinitions the
// provider depends on; a change to one of them is worth a new check.
var RequiredGroups = sets.New("kubevirt.io", "cdi.kubevirt.io")

// APIStatus is the outcome of CheckAPIs, ready to become a condition.
type APIStatus struct {
	// Available is true when every required API is served.
	Available bool
	// Reason is a condition reason: Available, KubeVirtNotInstalled,
	// CDINotInstalled or InfraClusterUnreachable.
	Reason string
	// Message says what is missing, or the error met.
	Message string
}

// CheckAPIs asks the infra cluster's discovery endpoint whether it serves the
// KubeVirt and CDI resources the provider uses.
func CheckAPIs(client discovery.DiscoveryInterface) APIStatus {
	for _, api := range requiredAPIs {
		list, err := client.ServerResourcesForGroupVersion(api.groupVersion)
		if apierrors.IsNotFound(err) {
			return APIStatus{Reason: api.reason, Message: fmt.Sprintf(
				"the infra cluster does not serve %s; install %s there", api.groupVersion, api.product)}
		}
		if err != nil {
			return APIStatus{Reason: infrav1.InfraClusterUnreachableReason, Message: fmt.Sprintf(
				"discovering %s on the infra cluster: %v", api.groupVersion, err)}
		}
		served := sets.New[string]()
		for _, r := range list.APIResources {
			served.Insert(r.Name)
		}
		if missing := sets.New(api.resources...).Difference(served); missing.Len() > 0 {
			return APIStatus{Reason: api.reason, Message: fmt.Sprintf(
				"the infra cluster serves %s without %s; check the %s installation",
				api.groupVersion, strings.Join(sets.List(missing), ", "), api.product)}
		}
	}
	return servedStatus
}

var servedStatus = APIStatus{Available: true, Reason: infrav1.AvailableReason,
	Message: "KubeVirt and CDI APIs are served"}

// apisRecheck is how long an infra cluster's APIs are taken as served
// without asking again. An external cluster's CustomResourceDefinitions are
// not watched, so a removal there is noticed within this time; on the
// management cluster CRD events make the next check ask at once, and this
// bounds the case where a check raced the API server's discovery update.
const apisRecheck = time.Minute

// rememberedAPIs remembers that an infra cluster served the required APIs,
// so that reconciles do not ask its discovery endpoint two questions each.
// A failed check is never remembered: the next reconcile asks again.
type rememberedAPIs struct {
	discovery discovery.DiscoveryInterface
	// ttl bounds how long a success is remembered; zero means until forget.
	ttl time.Duration

	mu     sync.Mutex
	served time.Time
	// forgotten counts forget calls, so that a check that was under way
	// when the APIs changed does not remember its outdated answer.
	forgotten uint64
}

func (r *rememberedAPIs) check() APIStatus {
	r.mu.Lock()
	served, gen := r.served, r.forgotten
	r.mu.Unlock()
	if !served.IsZero() && (r.ttl == 0 || time.Since(served) < r.ttl) {
		return servedStatus
	}
	status := CheckAPIs(r.discovery)
	r.mu.Lock()
	defer r.mu.Unlock()
	if status.Available && gen == r.forgotten {
		r.served = time.Now()
	} else {
		r.served = time.Time{}
	}
	return status
}

func (r *rememberedAPIs) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.served = time.Time{}
	r.forgotten++
}

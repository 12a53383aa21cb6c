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
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmstatus"
)

// cloneEarly creates the root disk's DataVolume of a machine that still
// waits for its bootstrap data, so that CDI clones it from the golden volume
// meanwhile. A worker gets its bootstrap data only once its control plane is
// up; cloning only after that put every worker's clone behind that wait
// (docs/benchmark.md#cloning-while-waiting-for-bootstrap-data). The VM,
// created later with the same DataVolume template, uses this DataVolume as
// it is. The DataVolume is the machine's: its owner annotation maps CDI's
// events to the machine, and the machine's deletion deletes it. The outcome
// stays the wait for bootstrap data unless the clone fails.
func (s *Service) cloneEarly(ctx context.Context, sc *Scope, key types.NamespacedName, goldenVolume *types.NamespacedName) (outcome.Outcome, error) {
	km := sc.KubevirtMachine
	want, err := vmbuilder.RootDataVolume(vmbuilder.Input{Name: key.Name, Namespace: key.Namespace, Spec: km.Spec,
		KubevirtMachineNamespace: km.Namespace, GoldenVolume: goldenVolume, Owner: infraOwner(sc, key)})
	if err != nil {
		return outcome.Fail(infrav1.CreateFailedReason, err.Error()), nil
	}
	dv := &cdiv1.DataVolume{}
	found, err := get(ctx, sc.Infra().Client, client.ObjectKeyFromObject(want), dv)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if found {
		if !s.ours(km, dv) {
			return nameConflict("DataVolume", dv), nil
		}
		if st, _ := vmstatus.Disk(dv); st.Warning {
			return outcome.Fail(st.Reason, st.Message), nil
		}
		return cloningWhileWaiting(want), nil
	}
	err = sc.Infra().Client.Create(ctx, want)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		// An existing one is ours, created by an earlier reconcile the
		// cache has not seen yet: its watch event follows.
		return cloningWhileWaiting(want), nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// Nothing is lost: KubeVirt clones the disk once the VM exists,
		// as it did before. An infra kubeconfig without create on
		// datavolumes/source lands here (docs/operations.md).
		w := waitingForBootstrapData()
		return outcome.Wait(w.Reason, w.Message+"; the root disk is cloned once the VM exists, the infra cluster refused to clone it earlier: "+err.Error()), nil
	}
	return outcome.Outcome{}, fmt.Errorf("creating root disk DataVolume %s: %w", key, err)
}

// cloningWhileWaiting is the wait for bootstrap data while CDI clones the
// root disk into dv. The message leaves out CDI's phase, which would cost
// a status write per phase on every waiting machine.
func cloningWhileWaiting(dv *cdiv1.DataVolume) outcome.Outcome {
	w := waitingForBootstrapData()
	return outcome.Wait(w.Reason, fmt.Sprintf("%s; meanwhile CDI clones the root disk into DataVolume %s/%s", w.Message, dv.Namespace, dv.Name))
}

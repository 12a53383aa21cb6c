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
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// CanUpdateMachineSet answers Cluster API's CanUpdateMachineSet hook with
// the part of a MachineDeployment's change the provider can make in place,
// as a patch of the current KubevirtMachineTemplate. The MachineSet's and
// the bootstrap template's changes are not the provider's to cover; a
// change it cannot cover is left out, so Cluster API rolls the machines
// as before.
func CanUpdateMachineSet(_ context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	current, desired := &infrav1.KubevirtMachineTemplate{}, &infrav1.KubevirtMachineTemplate{}
	ours, err := decodeBoth(req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate, "KubevirtMachineTemplate", current, desired)
	if err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachineTemplate")
		return
	}
	patch, message, err := plan(&current.Spec.Template.Spec, &desired.Spec.Template.Spec, TemplateSpecPath)
	resp.InfrastructureMachineTemplatePatch = patch
	answer(&resp.CommonResponse, err, message)
}

// CanUpdateMachine answers Cluster API's CanUpdateMachine hook (a
// KubeadmControlPlane's machines) the same way, as a patch of the current
// KubevirtMachine.
func CanUpdateMachine(_ context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	current, desired := &infrav1.KubevirtMachine{}, &infrav1.KubevirtMachine{}
	ours, err := decodeBoth(req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, "KubevirtMachine", current, desired)
	if err != nil || !ours {
		answer(&resp.CommonResponse, err, "not a KubevirtMachine")
		return
	}
	patch, message, err := plan(&current.Spec, &desired.Spec, MachineSpecPath)
	resp.InfrastructureMachinePatch = patch
	answer(&resp.CommonResponse, err, message)
}

// decodeBoth reads the current and desired objects into current and
// desired, and reports false when they are not of kind: another
// provider's, nothing for this one to cover.
func decodeBoth(currentRaw, desiredRaw runtime.RawExtension, kind string, current, desired any) (bool, error) {
	for _, o := range []struct {
		raw  runtime.RawExtension
		into any
		what string
	}{{currentRaw, current, "current"}, {desiredRaw, desired, "desired"}} {
		meta := metav1.TypeMeta{}
		if err := json.Unmarshal(o.raw.Raw, &meta); err != nil {
			return false, fmt.Errorf("reading the %s infrastructure object: %w", o.what, err)
		}
		if meta.Kind != kind || meta.GroupVersionKind().Group != infrav1.GroupVersion.Group {
			return false, nil
		}
		if err := json.Unmarshal(o.raw.Raw, o.into); err != nil {
			return false, fmt.Errorf("reading the %s %s: %w", o.what, kind, err)
		}
	}
	return true, nil
}

// plan decides and patches, and says what it covers and leaves out.
func plan(current, desired *infrav1.KubevirtMachineSpec, path []string) (runtimehooksv1.Patch, string, error) {
	p := Decide(current, desired)
	patch, err := Patch(current, &p.Covered, path)
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

func answer(resp *runtimehooksv1.CommonResponse, err error, message string) {
	if err != nil {
		resp.Status, resp.Message = runtimehooksv1.ResponseStatusFailure, err.Error()
		return
	}
	resp.Status, resp.Message = runtimehooksv1.ResponseStatusSuccess, message
}

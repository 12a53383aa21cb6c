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

package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The world's KubeVirt CR starts as KubeVirt's install leaves it: no
// feature gates, no workload update methods. These are the merge patches
// docs/in-place-updates.md and docs/tenant-cloud.md tell a platform
// engineer to apply to it with kubectl; a test that needs what they turn
// on applies them the same way.
const (
	// LiveMigrateUpdatesPatch lets virt-controller live migrate running
	// VMs onto a hot-plugged CPU or memory.
	LiveMigrateUpdatesPatch = `{"spec":{"workloadUpdateStrategy":{"workloadUpdateMethods":["LiveMigrate"]}}}`
	// ExpandDisksPatch turns on the ExpandDisks feature gate, without which
	// a running VM keeps its disk's size when the claim grows.
	ExpandDisksPatch = `{"spec":{"configuration":{"developerConfiguration":{"featureGates":["ExpandDisks"]}}}}`
	// HotplugVolumesPatch turns on the HotplugVolumes feature gate, without
	// which virt-api refuses the addvolume the tenant's CSI driver calls
	// (docs/tenant-cloud.md).
	HotplugVolumesPatch = `{"spec":{"configuration":{"developerConfiguration":{"featureGates":["HotplugVolumes"]}}}}`
	// PermittedGPUPatch permits the world's GPU model (GPUResource), whose
	// nodes' device plugin is NVIDIA's rather than virt-handler's
	// (externalResourceProvider): once the list is set, virt-controller
	// renders a launcher pod only for a VM whose GPUs it names
	// (docs/kubevirt-behaviour.md#gpus-and-host-devices).
	PermittedGPUPatch = `{"spec":{"configuration":{"permittedHostDevices":{"pciHostDevices":[` +
		`{"pciVendorSelector":"10DE:2236","resourceName":"` + GPUResource + `","externalResourceProvider":true}]}}}}`
)

// GPUResource is the device plugin resource of the world's GPU model, an
// NVIDIA A10 as NVIDIA's device plugin names it.
const GPUResource = "nvidia.com/GA102GL_A10"

// PatchKubeVirt applies the merge patches to every KubeVirt CR c sees and
// returns what puts back the feature gates, workload update methods and
// permitted host devices each had before.
func PatchKubeVirt(ctx context.Context, c client.Client, patches ...string) (restore func(context.Context) error, err error) {
	kvs := &kubevirtv1.KubeVirtList{}
	if err := c.List(ctx, kvs); err != nil {
		return nil, fmt.Errorf("listing KubeVirt CRs: %w", err)
	}
	if len(kvs.Items) == 0 {
		return nil, fmt.Errorf("no KubeVirt CR to patch")
	}
	var restores []func(context.Context) error
	restore = func(ctx context.Context) error {
		for _, r := range restores {
			if err := r(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range kvs.Items {
		kv := &kvs.Items[i]
		back, err := restorePatch(kv)
		if err != nil {
			return nil, errors.Join(err, restore(ctx))
		}
		key := client.ObjectKeyFromObject(kv)
		restores = append(restores, func(ctx context.Context) error {
			obj := &kubevirtv1.KubeVirt{}
			obj.Namespace, obj.Name = key.Namespace, key.Name
			return client.IgnoreNotFound(c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, back)))
		})
		for _, p := range patches {
			if err := c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
				// What was patched is put back, so that a failed call
				// leaves no test after it a changed CR.
				return nil, errors.Join(fmt.Errorf("patching KubeVirt %s with %s: %w", key, p, err), restore(ctx))
			}
		}
	}
	return restore, nil
}

// restorePatch is the merge patch that sets kv's feature gates, workload
// update methods and permitted host devices back to what they are now
// (null removes them).
func restorePatch(kv *kubevirtv1.KubeVirt) ([]byte, error) {
	var gates []string
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil {
		gates = dc.FeatureGates
	}
	methods := kv.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods
	orNull := func(v []string) any {
		if v == nil {
			return nil
		}
		return v
	}
	// A merge patch merges objects: each list is written, null where it
	// was not, so that what a patch added goes.
	var permitted any
	if p := kv.Spec.Configuration.PermittedHostDevices; p != nil {
		orNone := func(v any, empty bool) any {
			if empty {
				return nil
			}
			return v
		}
		permitted = map[string]any{
			"pciHostDevices":  orNone(p.PciHostDevices, p.PciHostDevices == nil),
			"mediatedDevices": orNone(p.MediatedDevices, p.MediatedDevices == nil),
			"usb":             orNone(p.USB, p.USB == nil),
		}
	}
	return json.Marshal(map[string]any{"spec": map[string]any{
		"configuration": map[string]any{
			"developerConfiguration": map[string]any{"featureGates": orNull(gates)},
			"permittedHostDevices":   permitted,
		},
		"workloadUpdateStrategy": map[string]any{"workloadUpdateMethods": orNull(methodNames(methods))},
	}})
}

func methodNames(methods []kubevirtv1.WorkloadUpdateMethod) []string {
	if methods == nil {
		return nil
	}
	names := make([]string, len(methods))
	for i, m := range methods {
		names[i] = string(m)
	}
	return names
}

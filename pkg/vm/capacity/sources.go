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

package capacity

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelectsSources says whether a VM spec names an instance type or a
// preference, which ReadSources must then read from the infra cluster.
func SelectsSources(spec *kubevirtv1.VirtualMachineSpec) bool {
	return spec.Instancetype != nil || spec.Preference != nil
}

// ReadSources reads the instance type and preference a VM spec selects,
// the namespaced kinds from the infra namespace ns; one that does not
// exist (yet) is left nil.
func ReadSources(ctx context.Context, c client.Reader, ns string, spec *kubevirtv1.VirtualMachineSpec) (Sources, error) {
	var src Sources
	var err error
	if m := spec.Instancetype; m != nil {
		it, cit := &instancetypev1beta1.VirtualMachineInstancetype{}, &instancetypev1beta1.VirtualMachineClusterInstancetype{}
		if src.Instancetype, err = readSpec(ctx, c, ns, m.Kind, m.Name, it, &it.Spec, cit, &cit.Spec); err != nil {
			return src, err
		}
	}
	if m := spec.Preference; m != nil {
		p, cp := &instancetypev1beta1.VirtualMachinePreference{}, &instancetypev1beta1.VirtualMachineClusterPreference{}
		if src.Preference, err = readSpec(ctx, c, ns, m.Kind, m.Name, p, &p.Spec, cp, &cp.Spec); err != nil {
			return src, err
		}
	}
	return src, nil
}

// readSpec reads name as the namespaced object (in ns) when kind names the
// namespaced kind, else as the cluster-wide one, and returns the spec of
// the one read; nil when it does not exist.
func readSpec[S any](ctx context.Context, c client.Reader, ns, kind, name string,
	namespacedObj client.Object, namespacedSpec *S, clusterObj client.Object, clusterSpec *S) (*S, error) {
	obj, spec, key := clusterObj, clusterSpec, types.NamespacedName{Name: name}
	if Namespaced(kind) {
		obj, spec, key.Namespace = namespacedObj, namespacedSpec, ns
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return spec, nil
}

// Namespaced tells the namespaced kinds (VirtualMachineInstancetype,
// VirtualMachinePreference) from the cluster-wide ones, which KubeVirt uses
// when kind is empty.
func Namespaced(kind string) bool {
	k := strings.ToLower(kind)
	return k == "virtualmachineinstancetype" || k == "virtualmachinepreference"
}

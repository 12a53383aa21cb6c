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

package controllers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/capacity"
)

func selectsInstancetypeOrPreference(spec *kubevirtv1.VirtualMachineSpec) bool {
	return spec.Instancetype != nil || spec.Preference != nil
}

// readSources reads the instance type and preference a VM spec selects from
// the infra cluster's cache; one that does not exist (yet: they are watched)
// is left nil.
func readSources(ctx context.Context, infra *infracluster.Infra, spec *kubevirtv1.VirtualMachineSpec) (capacity.Sources, error) {
	var src capacity.Sources
	var err error
	if m := spec.Instancetype; m != nil {
		it, cit := &instancetypev1beta1.VirtualMachineInstancetype{}, &instancetypev1beta1.VirtualMachineClusterInstancetype{}
		if src.Instancetype, err = readSpec(ctx, infra, m.Kind, m.Name, it, &it.Spec, cit, &cit.Spec); err != nil {
			return src, err
		}
	}
	if m := spec.Preference; m != nil {
		p, cp := &instancetypev1beta1.VirtualMachinePreference{}, &instancetypev1beta1.VirtualMachineClusterPreference{}
		if src.Preference, err = readSpec(ctx, infra, m.Kind, m.Name, p, &p.Spec, cp, &cp.Spec); err != nil {
			return src, err
		}
	}
	return src, nil
}

// readSpec reads name as the namespaced object (in the infra namespace)
// when kind names the namespaced kind, else as the cluster-wide one, and
// returns the spec of the one read; nil when it does not exist.
func readSpec[S any](ctx context.Context, infra *infracluster.Infra, kind, name string,
	namespacedObj client.Object, namespacedSpec *S, clusterObj client.Object, clusterSpec *S) (*S, error) {
	obj, spec, key := clusterObj, clusterSpec, types.NamespacedName{Name: name}
	if namespaced(kind) {
		obj, spec, key.Namespace = namespacedObj, namespacedSpec, infra.Namespace
	}
	if err := infra.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return spec, nil
}

// namespaced tells the namespaced kinds (VirtualMachineInstancetype,
// VirtualMachinePreference) from the cluster-wide ones, which KubeVirt uses
// when kind is empty.
func namespaced(kind string) bool {
	k := strings.ToLower(kind)
	return k == "virtualmachineinstancetype" || k == "virtualmachinepreference"
}

// instancetypeToTemplates maps an instance type or preference to the
// templates naming it.
func (r *KubevirtMachineTemplateReconciler) instancetypeToTemplates(ctx context.Context, obj client.Object) []reconcile.Request {
	isPreference := false
	switch obj.(type) {
	case *instancetypev1beta1.VirtualMachinePreference, *instancetypev1beta1.VirtualMachineClusterPreference:
		isPreference = true
	}
	return listRequestsIf(ctx, r.Client, &infrav1.KubevirtMachineTemplateList{}, func(o client.Object) bool {
		spec := &o.(*infrav1.KubevirtMachineTemplate).Spec.Template.Spec.VirtualMachineTemplate.Spec
		name, kind := "", ""
		switch {
		case isPreference && spec.Preference != nil:
			name, kind = spec.Preference.Name, spec.Preference.Kind
		case !isPreference && spec.Instancetype != nil:
			name, kind = spec.Instancetype.Name, spec.Instancetype.Kind
		}
		return name != "" && name == obj.GetName() && namespaced(kind) == (obj.GetNamespace() != "")
	})
}

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
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/capacity"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
)

func selectsInstancetypeOrPreference(spec *kubevirtv1.VirtualMachineSpec) bool {
	return spec.Instancetype != nil || spec.Preference != nil
}

// readSources reads the instance type and preference a VM spec selects from
// the infra cluster's cache; one that does not exist (yet: they are watched)
// is left nil.
func readSources(ctx context.Context, infra *infracluster.Infra, spec *kubevirtv1.VirtualMachineSpec) (capacity.Sources, error) {
	var src capacity.Sources
	if m := spec.Instancetype; m != nil {
		var o client.Object
		var out *instancetypev1beta1.VirtualMachineInstancetypeSpec
		ns := ""
		if namespaced(m.Kind) {
			it := &instancetypev1beta1.VirtualMachineInstancetype{}
			o, out, ns = it, &it.Spec, infra.Namespace
		} else {
			it := &instancetypev1beta1.VirtualMachineClusterInstancetype{}
			o, out = it, &it.Spec
		}
		found, err := readOptional(ctx, infra, ns, m.Name, o)
		if err != nil {
			return src, err
		}
		if found {
			src.Instancetype = out
		}
	}
	if m := spec.Preference; m != nil {
		var o client.Object
		var out *instancetypev1beta1.VirtualMachinePreferenceSpec
		ns := ""
		if namespaced(m.Kind) {
			p := &instancetypev1beta1.VirtualMachinePreference{}
			o, out, ns = p, &p.Spec, infra.Namespace
		} else {
			p := &instancetypev1beta1.VirtualMachineClusterPreference{}
			o, out = p, &p.Spec
		}
		found, err := readOptional(ctx, infra, ns, m.Name, o)
		if err != nil {
			return src, err
		}
		if found {
			src.Preference = out
		}
	}
	return src, nil
}

func readOptional(ctx context.Context, infra *infracluster.Infra, namespace, name string, obj client.Object) (bool, error) {
	if err := infra.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return true, nil
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
	templates := &infrav1.KubevirtMachineTemplateList{}
	if err := r.Client.List(ctx, templates); err != nil {
		return nil
	}
	isPreference := false
	switch obj.(type) {
	case *instancetypev1beta1.VirtualMachinePreference, *instancetypev1beta1.VirtualMachineClusterPreference:
		isPreference = true
	}
	var reqs []reconcile.Request
	for _, t := range templates.Items {
		spec := &t.Spec.Template.Spec.VirtualMachineTemplate.Spec
		name, kind := "", ""
		switch {
		case isPreference && spec.Preference != nil:
			name, kind = spec.Preference.Name, spec.Preference.Kind
		case !isPreference && spec.Instancetype != nil:
			name, kind = spec.Instancetype.Name, spec.Instancetype.Kind
		}
		if name != "" && name == obj.GetName() && namespaced(kind) == (obj.GetNamespace() != "") {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return reqs
}

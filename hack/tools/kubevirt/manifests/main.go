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

// Command manifests prints, as multi-document YAML, what installing
// KubeVirt v1.7.0 puts on a cluster: the KubeVirt CRD and a KubeVirt CR
// "kubevirt" in namespace "kubevirt" (what a platform engineer applies),
// then what virt-operator installs for that CR: CRDs, RBAC, Services,
// Deployments (for their flags), webhook configurations, APIServices,
// ConfigMaps and admission policies. The test world applies it and runs
// virt-api and virt-controller itself, instead of keeping a copy of
// KubeVirt's resources in this repository.
package main

import (
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	"kubevirt.io/kubevirt/pkg/virt-operator/util"
	"sigs.k8s.io/yaml"
)

func main() {
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	strategy, err := install.GenerateCurrentInstallStrategy(util.GetTargetConfigFromKV(kv), "", kv.Namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generating the install strategy:", err)
		os.Exit(1)
	}
	kvCRD, err := components.NewKubeVirtCrd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "generating the KubeVirt CRD:", err)
		os.Exit(1)
	}
	// virt-operator's generator leaves the group out of the admission
	// policies' apiVersion; the API server needs it.
	for _, p := range strategy.ValidatingAdmissionPolicies() {
		p.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
	}
	for _, b := range strategy.ValidatingAdmissionPolicyBindings() {
		b.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
	}
	kv.TypeMeta = metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "KubeVirt"}
	objects := []any{kvCRD, kv}
	for _, list := range [][]any{
		toAny(strategy.CRDs()), toAny(strategy.ServiceAccounts()), toAny(strategy.ClusterRoles()),
		toAny(strategy.ClusterRoleBindings()), toAny(strategy.Roles()), toAny(strategy.RoleBindings()),
		toAny(strategy.Services()), toAny(strategy.Deployments()), toAny(strategy.ValidatingWebhookConfigurations()),
		toAny(strategy.MutatingWebhookConfigurations()), toAny(strategy.APIServices()), toAny(strategy.ConfigMaps()),
		toAny(strategy.ValidatingAdmissionPolicies()), toAny(strategy.ValidatingAdmissionPolicyBindings()),
	} {
		objects = append(objects, list...)
	}
	for _, o := range objects {
		out, err := yaml.Marshal(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("---\n%s", out)
	}
}

func toAny[T any](items []T) []any {
	out := make([]any, 0, len(items))
	for _, i := range items {
		out = append(out, i)
	}
	return out
}

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

package webhooks

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

var allowedServiceTypes = []string{
	string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeNodePort), string(corev1.ServiceTypeLoadBalancer),
	string(infrav1.ServiceTypeNone),
}

// defaultClusterSpec fills defaults of a KubevirtClusterSpec.
func defaultClusterSpec(spec *infrav1.KubevirtClusterSpec) {
	if spec.ControlPlaneServiceTemplate.Spec.Type == "" {
		spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeClusterIP
	}
	defaultSecretRef(spec.InfraClusterSecretRef)
	defaultSecretRef(spec.SSHKeys.ConfigRef)
}

// validateClusterSpec checks a KubevirtClusterSpec on its own.
func validateClusterSpec(spec *infrav1.KubevirtClusterSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	ep := spec.ControlPlaneEndpoint
	errs = append(errs, validateHost(ep.Host, fld.Child("controlPlaneEndpoint", "host"))...)
	if ep.Port < 0 || ep.Port > 65535 {
		errs = append(errs, field.Invalid(fld.Child("controlPlaneEndpoint", "port"), ep.Port, "must be between 1 and 65535, or 0 to let the provider choose"))
	}

	svc := fld.Child("controlPlaneServiceTemplate")
	errs = append(errs, validateMetadata(&spec.ControlPlaneServiceTemplate.ObjectMeta, svc.Child("metadata"))...)
	if t := spec.ControlPlaneServiceTemplate.Spec.Type; t != "" && !contains(allowedServiceTypes, string(t)) {
		errs = append(errs, field.NotSupported(svc.Child("spec", "type"), t, allowedServiceTypes))
	}

	if spec.ControlPlaneServiceTemplate.Spec.Type == infrav1.ServiceTypeNone && ep.Host == "" {
		errs = append(errs, field.Required(fld.Child("controlPlaneEndpoint", "host"),
			"with controlPlaneServiceTemplate.spec.type None the endpoint is provided elsewhere and must be set here"))
	}
	errs = append(errs, validateSecretRef(spec.SSHKeys.ConfigRef, fld.Child("sshKeys", "configRef"))...)
	if name := spec.SSHKeys.DataSecretName; name != nil {
		errs = append(errs, dns1123Subdomain(*name, fld.Child("sshKeys", "dataSecretName"))...)
	}
	errs = append(errs, validateSecretRef(spec.InfraClusterSecretRef, fld.Child("infraClusterSecretRef"))...)
	errs = append(errs, validateClusterNetworking(spec, fld)...)
	return errs
}

// validateClusterSpecUpdate checks the transitions allowed on a live
// KubevirtCluster: a set endpoint stays (tenant certificates are issued for
// it) and the infra cluster cannot move (what was created there would leak).
func validateClusterSpecUpdate(oldSpec, newSpec *infrav1.KubevirtClusterSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	oldEP, newEP := oldSpec.ControlPlaneEndpoint, newSpec.ControlPlaneEndpoint
	if oldEP.Host != "" && oldEP.Host != newEP.Host {
		errs = append(errs, field.Forbidden(fld.Child("controlPlaneEndpoint", "host"), "cannot be changed once set"))
	}
	if oldEP.Port != 0 && oldEP.Port != newEP.Port {
		errs = append(errs, field.Forbidden(fld.Child("controlPlaneEndpoint", "port"), "cannot be changed once set"))
	}
	if !equality.Semantic.DeepEqual(oldSpec.InfraClusterSecretRef, newSpec.InfraClusterSecretRef) {
		errs = append(errs, field.Forbidden(fld.Child("infraClusterSecretRef"),
			"cannot be changed: what was created on the old infra cluster would be left behind"))
	}
	if !equality.Semantic.DeepEqual(oldSpec.IdentityRef, newSpec.IdentityRef) {
		errs = append(errs, field.Forbidden(fld.Child("identityRef"),
			"cannot be changed: what was created on the old infra cluster or namespace would be left behind"))
	}
	if oldNS, newNS := oldSpec.ControlPlaneServiceTemplate.ObjectMeta.Namespace, newSpec.ControlPlaneServiceTemplate.ObjectMeta.Namespace; oldNS != newNS {
		errs = append(errs, field.Forbidden(fld.Child("controlPlaneServiceTemplate", "metadata", "namespace"),
			"cannot be changed: it is the cluster's infra namespace, and what was created in the old one would be left behind"))
	}
	errs = append(errs, validateClusterNetworkUpdate(oldSpec, newSpec, fld)...)
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

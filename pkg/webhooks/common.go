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

// Package webhooks holds the defaulting and validating admission webhooks of
// the CAPKV kinds. Every rejection names the field path and says what is
// allowed.
package webhooks

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const secretKind = "Secret"

// defaultSecretRef fills the kind and API version of a Secret reference, so a
// reference written with just a name means a Secret.
func defaultSecretRef(ref *corev1.ObjectReference) {
	if ref == nil {
		return
	}
	if ref.Kind == "" {
		ref.Kind = secretKind
	}
	if ref.APIVersion == "" && ref.Kind == secretKind {
		ref.APIVersion = "v1"
	}
}

// validateSecretRef checks a reference to a Secret.
func validateSecretRef(ref *corev1.ObjectReference, fld *field.Path) field.ErrorList {
	if ref == nil {
		return nil
	}
	var errs field.ErrorList
	if ref.Kind != secretKind {
		errs = append(errs, field.NotSupported(fld.Child("kind"), ref.Kind, []string{secretKind}))
	}
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(fld.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), "the name of the Secret is required"))
	} else {
		errs = append(errs, dns1123Subdomain(ref.Name, fld.Child("name"))...)
	}
	if ref.Namespace != "" {
		errs = append(errs, dns1123Label(ref.Namespace, fld.Child("namespace"))...)
	}
	return errs
}

// validateMetadata checks the labels, annotations and namespace of an
// embedded ObjectMeta that the provider copies onto objects it creates.
func validateMetadata(meta *metav1.ObjectMeta, fld *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabels(meta.Labels, fld.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(meta.Annotations, fld.Child("annotations"))...)
	if meta.Namespace != "" {
		errs = append(errs, dns1123Label(meta.Namespace, fld.Child("namespace"))...)
	}
	return errs
}

func dns1123Label(value string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fld, value, msg))
	}
	return errs
}

func dns1123Subdomain(value string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(fld, value, msg))
	}
	return errs
}

// validateHost accepts an IP address or a DNS-1123 subdomain.
func validateHost(host string, fld *field.Path) field.ErrorList {
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(fld, host, fmt.Sprintf("must be an IP address or a DNS name: %s", msgs[0]))}
	}
	return nil
}

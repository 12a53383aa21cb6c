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
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// maxRemediationRetryLimit is the most restarts a remediation may try.
const maxRemediationRetryLimit = 10

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtremediation,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediations,versions=v1alpha1,name=default.kubevirtremediation.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtremediation,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediations,versions=v1alpha1,name=validation.kubevirtremediation.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtRemediation defaults and validates KubevirtRemediations.
type KubevirtRemediation struct{}

// Default fills the retry limit and timeout when left out.
func (KubevirtRemediation) Default(_ context.Context, r *infrav1.KubevirtRemediation) error {
	defaultRemediationSpec(&r.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtRemediation.
func (KubevirtRemediation) ValidateCreate(_ context.Context, r *infrav1.KubevirtRemediation) (admission.Warnings, error) {
	return nil, invalid("KubevirtRemediation", r, validateRemediationSpec(&r.Spec, field.NewPath("spec")))
}

// ValidateUpdate validates a changed KubevirtRemediation.
func (KubevirtRemediation) ValidateUpdate(_ context.Context, _, newR *infrav1.KubevirtRemediation) (admission.Warnings, error) {
	return nil, invalid("KubevirtRemediation", newR, validateRemediationSpec(&newR.Spec, field.NewPath("spec")))
}

// ValidateDelete allows every deletion.
func (KubevirtRemediation) ValidateDelete(context.Context, *infrav1.KubevirtRemediation) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtremediationtemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediationtemplates,versions=v1alpha1,name=default.kubevirtremediationtemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtremediationtemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtremediationtemplates,versions=v1alpha1,name=validation.kubevirtremediationtemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtRemediationTemplate defaults and validates
// KubevirtRemediationTemplates. Unlike the machine and cluster templates it
// may change: a change applies to remediations created afterwards.
type KubevirtRemediationTemplate struct{}

// Default fills the retry limit and timeout of the templated spec.
func (KubevirtRemediationTemplate) Default(_ context.Context, t *infrav1.KubevirtRemediationTemplate) error {
	defaultRemediationSpec(&t.Spec.Template.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtRemediationTemplate.
func (KubevirtRemediationTemplate) ValidateCreate(_ context.Context, t *infrav1.KubevirtRemediationTemplate) (admission.Warnings, error) {
	return nil, invalid("KubevirtRemediationTemplate", t, validateRemediationTemplate(t))
}

// ValidateUpdate validates a changed KubevirtRemediationTemplate.
func (KubevirtRemediationTemplate) ValidateUpdate(_ context.Context, _, newT *infrav1.KubevirtRemediationTemplate) (admission.Warnings, error) {
	return nil, invalid("KubevirtRemediationTemplate", newT, validateRemediationTemplate(newT))
}

// ValidateDelete allows every deletion.
func (KubevirtRemediationTemplate) ValidateDelete(context.Context, *infrav1.KubevirtRemediationTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateRemediationTemplate(t *infrav1.KubevirtRemediationTemplate) field.ErrorList {
	tmpl := field.NewPath("spec", "template")
	errs := t.Spec.Template.ObjectMeta.Validate(tmpl.Child("metadata"))
	return append(errs, validateRemediationSpec(&t.Spec.Template.Spec, tmpl.Child("spec"))...)
}

func defaultRemediationSpec(s *infrav1.KubevirtRemediationSpec) {
	if s.RetryLimit == 0 {
		s.RetryLimit = infrav1.DefaultRemediationRetryLimit
	}
	if s.TimeoutSeconds == 0 {
		s.TimeoutSeconds = infrav1.DefaultRemediationTimeoutSeconds
	}
}

// validateRemediationSpec checks what the CRD schema checks too, so that
// the error names the field the same way whichever refuses first.
func validateRemediationSpec(s *infrav1.KubevirtRemediationSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.RetryLimit < 1 || s.RetryLimit > maxRemediationRetryLimit {
		errs = append(errs, field.Invalid(fld.Child("retryLimit"), s.RetryLimit, "must be between 1 and 10"))
	}
	if s.TimeoutSeconds < 1 {
		errs = append(errs, field.Invalid(fld.Child("timeoutSeconds"), s.TimeoutSeconds, "must be at least 1"))
	}
	return errs
}

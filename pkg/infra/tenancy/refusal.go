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

// Package tenancy decides what a tenant may make the provider do on an
// infra cluster: where its objects may go (placement), what its VMs may
// mount, attach and be annotated with (guest), and whether the names the
// provider derives from its objects fit. Admission and the controllers ask
// the same questions, so that a webhook that is off, or a policy changed
// after admission, lets nothing through (docs/multi-tenancy.md).
package tenancy

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// Rule names, as refusals quote them and docs/multi-tenancy.md lists them.
const (
	RuleIdentityNotFound      = "identity-not-found"
	RuleIdentityNamespace     = "identity-namespace-not-allowed"
	RuleIdentityWithSecretRef = "identity-or-secret-ref"
	RuleInfraNamespace        = "infra-namespace-not-allowed"
	RuleSecretNamespace       = "infra-secret-namespace"
	RuleGuestVolumeSource     = "guest-volume-source"
	RuleGuestObjectNotOwned   = "guest-object-not-owned"
	RuleGuestNetworkNamespace = "guest-network-namespace"
	RuleGuestAnnotation       = "guest-annotation"
	RuleGuestCloneSource      = "guest-clone-source"
	RuleGuestReservedKey      = "guest-reserved-key"
	RuleGuestImportImage      = "guest-import-image"
	RuleTenantCloudShared     = "tenant-cloud-shared-namespace"
	RuleDerivedNameTooLong    = "derived-name-too-long"
)

// Refusal is one thing a tenant asked for that the policy does not allow:
// the field, the rule and what would be allowed.
type Refusal struct {
	// Rule is one of the Rule names.
	Rule string
	// Field is the path of the field asking for it.
	Field *field.Path
	// Message says what is refused and what is allowed instead.
	Message string
}

// Error reads "<field>: <message> (rule <name>)".
func (r *Refusal) Error() string {
	return fmt.Sprintf("%s: %s (multi-tenancy rule %s)", r.Field, r.Message, r.Rule)
}

// FieldError is the refusal as a webhook returns it.
func (r *Refusal) FieldError() *field.Error {
	return field.Forbidden(r.Field, fmt.Sprintf("%s (multi-tenancy rule %s)", r.Message, r.Rule))
}

// Refusals is a list of refusals.
type Refusals []*Refusal

// FieldErrors turns refusals into what a webhook returns.
func (rs Refusals) FieldErrors() field.ErrorList {
	var errs field.ErrorList
	for _, r := range rs {
		errs = append(errs, r.FieldError())
	}
	return errs
}

func refuse(rule string, fld *field.Path, format string, args ...any) *Refusal {
	return &Refusal{Rule: rule, Field: fld, Message: fmt.Sprintf(format, args...)}
}

// Outcome is a controller's outcome of a check: failed with
// NotAllowedByPolicy and the refusal's message, looked at again after
// recheck (labelling an object is not watched), or none.
func Outcome(refusal *Refusal, err error, recheck time.Duration) (outcome.Outcome, error) {
	if err != nil || refusal == nil {
		return outcome.Outcome{}, err
	}
	return outcome.Fail(infrav1.NotAllowedByPolicyReason, refusal.Error()).After(recheck), nil
}

// AsRefusal returns the refusal err is or wraps, else nil.
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

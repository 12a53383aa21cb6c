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
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// SetupWithManager registers the defaulting and validating webhooks of
// every kind with the manager's webhook server; policy is the
// multi-tenancy policy they check objects against.
func SetupWithManager(mgr ctrl.Manager, policy *tenancy.Policy) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtCluster{}).
		WithDefaulter(KubevirtCluster{}).WithValidator(KubevirtCluster{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtClusterTemplate{}).
		WithDefaulter(KubevirtClusterTemplate{}).WithValidator(KubevirtClusterTemplate{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtMachine{}).
		WithDefaulter(KubevirtMachine{}).WithValidator(KubevirtMachine{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtMachineTemplate{}).
		WithDefaulter(KubevirtMachineTemplate{}).WithValidator(KubevirtMachineTemplate{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtMachinePool{}).
		WithDefaulter(KubevirtMachinePool{}).WithValidator(KubevirtMachinePool{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtMachinePoolTemplate{}).
		WithDefaulter(KubevirtMachinePoolTemplate{}).WithValidator(KubevirtMachinePoolTemplate{Policy: policy}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtRemediation{}).
		WithDefaulter(KubevirtRemediation{}).WithValidator(KubevirtRemediation{}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.KubevirtRemediationTemplate{}).
		WithDefaulter(KubevirtRemediationTemplate{}).WithValidator(KubevirtRemediationTemplate{}).Complete()
}

// invalid turns a field error list into the API error the server returns.
func invalid(kind string, obj client.Object, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(infrav1.GroupVersion.WithKind(kind).GroupKind(), obj.GetName(), errs)
}

// isTopologyDryRun reports whether the request is a server-side-apply dry run
// sent by Cluster API's topology controller, which must pass immutability
// checks so ClusterClass can compute its diffs.
func isTopologyDryRun(ctx context.Context, obj client.Object) (bool, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("expected an admission request in the context: %v", err))
	}
	return topology.IsDryRunRequest(req, obj), nil
}

// immutableTemplate is the rule of every template kind: its
// spec.template.spec does not change once created (the objects made from it
// would not follow), except in the topology controller's dry runs. It
// returns the error for a change, with what to do instead.
func immutableTemplate(ctx context.Context, obj client.Object, oldSpec, newSpec any, remedy string) (field.ErrorList, error) {
	dryRun, err := isTopologyDryRun(ctx, obj)
	if err != nil || dryRun || equality.Semantic.DeepEqual(oldSpec, newSpec) {
		return nil, err
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "template", "spec"), "is immutable: "+remedy)}, nil
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtcluster,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters,versions=v1alpha1,name=default.kubevirtcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtcluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters,versions=v1alpha1,name=validation.kubevirtcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtCluster defaults and validates KubevirtClusters.
type KubevirtCluster struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults.
func (KubevirtCluster) Default(_ context.Context, c *infrav1.KubevirtCluster) error {
	defaultClusterSpec(&c.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtCluster.
func (w KubevirtCluster) ValidateCreate(ctx context.Context, c *infrav1.KubevirtCluster) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validateClusterSpec(&c.Spec, spec)
	errs = append(errs, validateClusterNames(c.Name)...)
	refused, err := clusterTenancy(ctx, w.Policy, c.Namespace, &c.Spec, spec)
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtCluster", c, append(errs, refused...))
}

// ValidateUpdate validates a changed KubevirtCluster.
func (w KubevirtCluster) ValidateUpdate(ctx context.Context, oldC, newC *infrav1.KubevirtCluster) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validateClusterSpec(&newC.Spec, spec)
	errs = append(errs, validateClusterSpecUpdate(&oldC.Spec, &newC.Spec, spec)...)
	if !equality.Semantic.DeepEqual(oldC.Spec, newC.Spec) {
		// Metadata and finalizers may change whatever the policy says
		// now: a cluster whose grant was withdrawn must still be able to
		// go.
		refused, err := clusterTenancy(ctx, w.Policy, newC.Namespace, &newC.Spec, spec)
		if err != nil {
			return nil, err
		}
		errs = append(errs, refused...)
	}
	return nil, invalid("KubevirtCluster", newC, errs)
}

// ValidateDelete allows every deletion.
func (KubevirtCluster) ValidateDelete(context.Context, *infrav1.KubevirtCluster) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtclustertemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclustertemplates,versions=v1alpha1,name=default.kubevirtclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclustertemplates,versions=v1alpha1,name=validation.kubevirtclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtClusterTemplate defaults and validates KubevirtClusterTemplates.
type KubevirtClusterTemplate struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults of the templated spec.
func (KubevirtClusterTemplate) Default(_ context.Context, t *infrav1.KubevirtClusterTemplate) error {
	defaultClusterSpec(&t.Spec.Template.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtClusterTemplate.
func (w KubevirtClusterTemplate) ValidateCreate(ctx context.Context, t *infrav1.KubevirtClusterTemplate) (admission.Warnings, error) {
	refused, err := clusterTenancy(ctx, w.Policy, t.Namespace, &t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtClusterTemplate", t, append(validateClusterTemplate(t), refused...))
}

// ValidateUpdate keeps the template immutable, except for the topology
// controller's dry runs.
func (KubevirtClusterTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.KubevirtClusterTemplate) (admission.Warnings, error) {
	immutable, err := immutableTemplate(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec,
		"create a new KubevirtClusterTemplate and point the ClusterClass at it")
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtClusterTemplate", newT, append(validateClusterTemplate(newT), immutable...))
}

// ValidateDelete allows every deletion.
func (KubevirtClusterTemplate) ValidateDelete(context.Context, *infrav1.KubevirtClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateClusterTemplate(t *infrav1.KubevirtClusterTemplate) field.ErrorList {
	tmpl := field.NewPath("spec", "template")
	errs := t.Spec.Template.ObjectMeta.Validate(tmpl.Child("metadata"))
	return append(errs, validateClusterSpec(&t.Spec.Template.Spec, tmpl.Child("spec"))...)
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachine,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,versions=v1alpha1,name=default.kubevirtmachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,versions=v1alpha1,name=validation.kubevirtmachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtMachine defaults and validates KubevirtMachines.
type KubevirtMachine struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults.
func (KubevirtMachine) Default(_ context.Context, m *infrav1.KubevirtMachine) error {
	defaultMachineSpec(&m.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtMachine.
func (w KubevirtMachine) ValidateCreate(ctx context.Context, m *infrav1.KubevirtMachine) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validateMachineSpec(&m.Spec, m.Namespace, spec)
	errs = append(errs, validateMachineNames(m.Name, &m.Spec)...)
	refused, err := machineTenancy(ctx, w.Policy, m, &m.Spec, spec)
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachine", m, append(errs, refused...))
}

// ValidateUpdate validates a changed KubevirtMachine; a changed spec (an
// in-place update) is checked against the multi-tenancy policy again.
func (w KubevirtMachine) ValidateUpdate(ctx context.Context, oldM, newM *infrav1.KubevirtMachine) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validateMachineSpec(&newM.Spec, newM.Namespace, spec)
	// Cluster API writes an in-place update with its annotation, and
	// KubeadmControlPlane first asks, by a dry run without it, whether the
	// write would pass: a dry run changes nothing, so it may ask.
	_, inPlace := newM.Annotations[clusterv1.UpdateInProgressAnnotation]
	if req, err := admission.RequestFromContext(ctx); err == nil && ptr.Deref(req.DryRun, false) {
		inPlace = true
	}
	errs = append(errs, validateMachineSpecUpdate(&oldM.Spec, &newM.Spec, inPlace, spec)...)
	if !equality.Semantic.DeepEqual(oldM.Spec, newM.Spec) {
		refused, err := machineTenancy(ctx, w.Policy, newM, &newM.Spec, spec)
		if err != nil {
			return nil, err
		}
		errs = append(errs, refused...)
	}
	return nil, invalid("KubevirtMachine", newM, errs)
}

// ValidateDelete allows every deletion.
func (KubevirtMachine) ValidateDelete(context.Context, *infrav1.KubevirtMachine) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinetemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates,versions=v1alpha1,name=default.kubevirtmachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates,versions=v1alpha1,name=validation.kubevirtmachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtMachineTemplate defaults and validates KubevirtMachineTemplates.
type KubevirtMachineTemplate struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults of the templated spec.
func (KubevirtMachineTemplate) Default(_ context.Context, t *infrav1.KubevirtMachineTemplate) error {
	defaultMachineSpec(&t.Spec.Template.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtMachineTemplate.
func (w KubevirtMachineTemplate) ValidateCreate(ctx context.Context, t *infrav1.KubevirtMachineTemplate) (admission.Warnings, error) {
	refused, err := machineTenancy(ctx, w.Policy, t, &t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachineTemplate", t, append(validateMachineTemplate(t), refused...))
}

// ValidateUpdate keeps the template immutable, except for the topology
// controller's dry runs.
func (KubevirtMachineTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.KubevirtMachineTemplate) (admission.Warnings, error) {
	immutable, err := immutableTemplate(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec,
		"create a new KubevirtMachineTemplate and point the MachineDeployment or KubeadmControlPlane at it")
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachineTemplate", newT, append(validateMachineTemplate(newT), immutable...))
}

// ValidateDelete allows every deletion.
func (KubevirtMachineTemplate) ValidateDelete(context.Context, *infrav1.KubevirtMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateMachineTemplate(t *infrav1.KubevirtMachineTemplate) field.ErrorList {
	tmpl := field.NewPath("spec", "template")
	errs := t.Spec.Template.ObjectMeta.Validate(tmpl.Child("metadata"))
	errs = append(errs, validateMachineSpec(&t.Spec.Template.Spec, t.Namespace, tmpl.Child("spec"))...)
	if t.Spec.Template.Spec.ProviderID != nil {
		errs = append(errs, field.Forbidden(tmpl.Child("spec", "providerID"),
			"is set by the provider on each KubevirtMachine; a template must leave it empty"))
	}
	return errs
}

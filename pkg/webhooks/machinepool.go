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

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinepool,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepools,versions=v1alpha1,name=default.kubevirtmachinepool.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinepool,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepools,versions=v1alpha1,name=validation.kubevirtmachinepool.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtMachinePool defaults and validates KubevirtMachinePools.
type KubevirtMachinePool struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults of the pool's machine spec.
func (KubevirtMachinePool) Default(_ context.Context, p *infrav1.KubevirtMachinePool) error {
	defaultMachineSpec(&p.Spec.Template.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtMachinePool.
func (w KubevirtMachinePool) ValidateCreate(ctx context.Context, p *infrav1.KubevirtMachinePool) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validatePoolSpec(&p.Spec, p.Namespace, spec)
	refused, err := machineTenancy(ctx, w.Policy, p, &p.Spec.Template.Spec, spec.Child("template", "spec"))
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachinePool", p, append(errs, refused...))
}

// ValidateUpdate validates a changed KubevirtMachinePool. Its machine spec
// may change (the provider rolls the instances), except for the infra
// cluster and namespace: the pool's VMs cannot move.
func (w KubevirtMachinePool) ValidateUpdate(ctx context.Context, oldP, newP *infrav1.KubevirtMachinePool) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validatePoolSpec(&newP.Spec, newP.Namespace, spec)
	if !equality.Semantic.DeepEqual(oldP.Spec, newP.Spec) {
		// As for clusters: metadata and finalizers may always change.
		refused, err := machineTenancy(ctx, w.Policy, newP, &newP.Spec.Template.Spec, spec.Child("template", "spec"))
		if err != nil {
			return nil, err
		}
		errs = append(errs, refused...)
	}
	if !equality.Semantic.DeepEqual(oldP.Spec.Template.Spec.IdentityRef, newP.Spec.Template.Spec.IdentityRef) {
		errs = append(errs, field.Forbidden(spec.Child("template", "spec", "identityRef"),
			"cannot be changed: the pool's VMs stay on the infra cluster they were created on; create another MachinePool"))
	}
	if !equality.Semantic.DeepEqual(oldP.Spec.Template.Spec.InfraClusterSecretRef, newP.Spec.Template.Spec.InfraClusterSecretRef) {
		errs = append(errs, field.Forbidden(spec.Child("template", "spec", "infraClusterSecretRef"),
			"cannot be changed: the pool's VMs stay on the infra cluster they were created on; create another MachinePool"))
	}
	if oldP.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Namespace != newP.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Namespace {
		errs = append(errs, field.Forbidden(spec.Child("template", "spec", "virtualMachineTemplate", "metadata", "namespace"),
			"cannot be changed: the pool's VMs stay in the namespace they were created in; create another MachinePool"))
	}
	return nil, invalid("KubevirtMachinePool", newP, errs)
}

// ValidateDelete allows every deletion.
func (KubevirtMachinePool) ValidateDelete(context.Context, *infrav1.KubevirtMachinePool) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinepooltemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepooltemplates,versions=v1alpha1,name=default.kubevirtmachinepooltemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinepooltemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinepooltemplates,versions=v1alpha1,name=validation.kubevirtmachinepooltemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubevirtMachinePoolTemplate defaults and validates
// KubevirtMachinePoolTemplates.
type KubevirtMachinePoolTemplate struct {
	// Policy is the multi-tenancy policy; nil checks the defaults only.
	Policy *tenancy.Policy
}

// Default fills defaults of the templated machine spec.
func (KubevirtMachinePoolTemplate) Default(_ context.Context, t *infrav1.KubevirtMachinePoolTemplate) error {
	defaultMachineSpec(&t.Spec.Template.Spec.Template.Spec)
	return nil
}

// ValidateCreate validates a new KubevirtMachinePoolTemplate.
func (w KubevirtMachinePoolTemplate) ValidateCreate(ctx context.Context, t *infrav1.KubevirtMachinePoolTemplate) (admission.Warnings, error) {
	refused, err := machineTenancy(ctx, w.Policy, t, &t.Spec.Template.Spec.Template.Spec, field.NewPath("spec", "template", "spec", "template", "spec"))
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachinePoolTemplate", t, append(validatePoolTemplate(t), refused...))
}

// ValidateUpdate keeps the template immutable, except for the topology
// controller's dry runs.
func (KubevirtMachinePoolTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.KubevirtMachinePoolTemplate) (admission.Warnings, error) {
	immutable, err := immutableTemplate(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec,
		"create a new KubevirtMachinePoolTemplate and point the ClusterClass at it")
	if err != nil {
		return nil, err
	}
	return nil, invalid("KubevirtMachinePoolTemplate", newT, append(validatePoolTemplate(newT), immutable...))
}

// ValidateDelete allows every deletion.
func (KubevirtMachinePoolTemplate) ValidateDelete(context.Context, *infrav1.KubevirtMachinePoolTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validatePoolTemplate(t *infrav1.KubevirtMachinePoolTemplate) field.ErrorList {
	tmpl := field.NewPath("spec", "template")
	errs := t.Spec.Template.ObjectMeta.Validate(tmpl.Child("metadata"))
	errs = append(errs, validatePoolSpec(&t.Spec.Template.Spec, t.Namespace, tmpl.Child("spec"))...)
	if len(t.Spec.Template.Spec.ProviderIDList) > 0 {
		errs = append(errs, field.Forbidden(tmpl.Child("spec", "providerIDList"),
			"is set by the provider on each KubevirtMachinePool; a template must leave it empty"))
	}
	return errs
}

// validatePoolSpec validates the pool's machine template like a
// KubevirtMachineTemplate's.
func validatePoolSpec(spec *infrav1.KubevirtMachinePoolSpec, namespace string, fld *field.Path) field.ErrorList {
	tmpl := fld.Child("template")
	errs := spec.Template.ObjectMeta.Validate(tmpl.Child("metadata"))
	errs = append(errs, validateMachineSpec(&spec.Template.Spec, namespace, tmpl.Child("spec"))...)
	if spec.Template.Spec.ProviderID != nil {
		errs = append(errs, field.Forbidden(tmpl.Child("spec", "providerID"),
			"is set by the provider on each instance's KubevirtMachine; a pool's template must leave it empty"))
	}
	if spec.Template.Spec.BootstrapCheckSpec.CheckStrategy == infrav1.CheckStrategySSH {
		errs = append(errs, field.NotSupported(tmpl.Child("spec", "virtualMachineBootstrapCheck", "checkStrategy"),
			infrav1.CheckStrategySSH, []string{infrav1.CheckStrategyNone, infrav1.CheckStrategyGuestAgent}))
	}
	if len(spec.Template.Spec.NetworkAddresses) > 0 {
		errs = append(errs, field.Forbidden(tmpl.Child("spec", "networkAddresses"),
			"a pool's VMs share one template, so no instance can get an address of its own; use MachineDeployments for pool addresses (docs/ipam.md)"))
	}
	vmiPath := tmpl.Child("spec", "virtualMachineTemplate", "spec", "template", "spec")
	if vmi := spec.Template.Spec.VirtualMachineTemplate.Spec.Template; vmi != nil && vmi.Spec.Hostname != "" {
		errs = append(errs, field.Forbidden(vmiPath.Child("hostname"),
			"every instance of a pool would get this hostname and their tenant Nodes would collide; leave it empty, each instance is named after its VM"))
	}
	// virt-api validates a VirtualMachinePool's VM template as written,
	// before any default architecture, and refuses maxGuest without amd64
	// (vmpool-admitter and pkg/liveupdate/memory of v1.7.0).
	if vmi := spec.Template.Spec.VirtualMachineTemplate.Spec.Template; vmi != nil && vmi.Spec.Domain.Memory != nil &&
		vmi.Spec.Domain.Memory.MaxGuest != nil && vmi.Spec.Architecture == "" {
		errs = append(errs, field.Forbidden(vmiPath.Child("domain", "memory", "maxGuest"),
			"KubeVirt refuses a VirtualMachinePool whose VMs set maxGuest without architecture amd64; "+
				"Cluster API updates no MachinePool in place, so leave maxGuest out"))
	}
	return errs
}

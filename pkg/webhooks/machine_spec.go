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
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
)

var allowedCheckStrategies = []string{infrav1.CheckStrategyNone, infrav1.CheckStrategySSH, infrav1.CheckStrategyGuestAgent}

// defaultMachineSpec fills defaults of a KubevirtMachineSpec.
func defaultMachineSpec(spec *infrav1.KubevirtMachineSpec) {
	vm := &spec.VirtualMachineTemplate.Spec
	// KubeVirt refuses a VM without a run strategy; a tenant node should run.
	if vm.Running == nil && vm.RunStrategy == nil {
		always := kubevirtv1.RunStrategyAlways
		vm.RunStrategy = &always
	}
	defaultSecretRef(spec.InfraClusterSecretRef)
}

// validateMachineSpec checks a KubevirtMachineSpec. namespace is the namespace
// of the object holding the spec, where the VM goes unless the template names
// another.
func validateMachineSpec(spec *infrav1.KubevirtMachineSpec, namespace string, fld *field.Path) field.ErrorList {
	vmt := fld.Child("virtualMachineTemplate")
	errs := validateMetadata(&spec.VirtualMachineTemplate.ObjectMeta, vmt.Child("metadata"))
	vmNamespace := spec.VirtualMachineTemplate.ObjectMeta.Namespace
	if vmNamespace == "" {
		vmNamespace = namespace
	}
	errs = append(errs, validateVirtualMachineSpec(&spec.VirtualMachineTemplate.Spec, vmNamespace, vmt.Child("spec"))...)

	if id := spec.ProviderID; id != nil && (!strings.HasPrefix(*id, infrav1.ProviderIDPrefix) || len(*id) == len(infrav1.ProviderIDPrefix)) {
		errs = append(errs, field.Invalid(fld.Child("providerID"), *id, "must have the form kubevirt://<vm name>"))
	}
	if s := spec.BootstrapCheckSpec.CheckStrategy; s != "" && !contains(allowedCheckStrategies, s) {
		errs = append(errs, field.NotSupported(fld.Child("virtualMachineBootstrapCheck", "checkStrategy"), s, allowedCheckStrategies))
	}
	if spec.BootstrapCheckSpec.CheckStrategy == infrav1.CheckStrategyGuestAgent {
		if tmpl := spec.VirtualMachineTemplate.Spec.Template; tmpl != nil && tmpl.Spec.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(vmt.Child("spec", "template", "spec", "readinessProbe"),
				"the guest-agent bootstrap check sets the readiness probe; remove it or choose another checkStrategy"))
		}
	}
	if n := spec.NodeAddressNetwork; n != "" {
		// It may name a network of the cluster, which the machine cannot
		// see here; the controller reports NodeNetworkNotFound otherwise.
		errs = append(errs, dns1123Label(n, fld.Child("nodeAddressNetwork"))...)
	}
	errs = append(errs, validateSecretRef(spec.InfraClusterSecretRef, fld.Child("infraClusterSecretRef"))...)
	errs = append(errs, validateProviderDisks(spec, fld)...)
	errs = append(errs, validateMachineNetworks(spec, fld)...)
	errs = append(errs, validateNetworkAddresses(spec, fld)...)
	errs = append(errs, validatePlacement(&spec.Placement, fld.Child("placement"))...)
	errs = append(errs, validatePreset(spec, fld)...)
	return errs
}

// validateMachineSpecUpdate allows providerID to go from unset to set,
// and, while Cluster API updates the machine in place (its
// update-in-progress annotation on the new object), the changes the
// provider applies to the running VM (pkg/machine/inplace). The VM is built from
// the rest once, so any other change would silently do nothing.
func validateMachineSpecUpdate(oldSpec, newSpec *infrav1.KubevirtMachineSpec, inPlace bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if oldSpec.ProviderID != nil && !equality.Semantic.DeepEqual(oldSpec.ProviderID, newSpec.ProviderID) {
		errs = append(errs, field.Forbidden(fld.Child("providerID"), "cannot be changed once set"))
	}
	oldRest, newRest := oldSpec.DeepCopy(), newSpec.DeepCopy()
	oldRest.ProviderID, newRest.ProviderID = nil, nil
	if equality.Semantic.DeepEqual(oldRest, newRest) {
		return errs
	}
	if !inPlace {
		return append(errs, field.Forbidden(fld,
			"only providerID can be set on a KubevirtMachine; to change the VM, change the KubevirtMachineTemplate: Cluster API replaces the machine, or updates it in place where it can (docs/in-place-updates.md)"))
	}
	for _, declined := range inplace.Decide(oldRest, newRest).Declined {
		errs = append(errs, field.Forbidden(fld, "cannot change in place: "+declined))
	}
	return errs
}

// validateMachineNetworks checks the machine's Multus networks against its
// VM template: a primary network leaves no room for a pod network.
func validateMachineNetworks(spec *infrav1.KubevirtMachineSpec, fld *field.Path) field.ErrorList {
	errs := validateMultusNetworks(spec.Networks, fld.Child("networks"))
	errs = append(errs, validatePrimaries(spec.Networks, fld.Child("networks"))...)
	tmpl := spec.VirtualMachineTemplate.Spec.Template
	if tmpl == nil {
		return errs
	}
	for i, n := range spec.Networks {
		if !n.Primary {
			continue
		}
		for _, tn := range tmpl.Spec.Networks {
			if tn.Pod != nil {
				errs = append(errs, field.Invalid(fld.Child("networks").Index(i).Child("primary"), true,
					fmt.Sprintf("a primary network replaces the pod network, but the VM template has pod network %q", tn.Name)))
			}
		}
	}
	return errs
}

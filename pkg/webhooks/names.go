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

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/controlplaneservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// derivedName is a name the provider derives from an object's, and the
// rule of the kind it names.
type derivedName struct {
	kind, name string
	// valid is the rule of the kind's names, as its API server or
	// webhook applies it.
	valid func(string) []string
}

// validateDerivedNames refuses an object whose derived names cannot be
// created: it would never get them, and say so only once it runs.
func validateDerivedNames(fld *field.Path, value string, names []derivedName) field.ErrorList {
	var errs field.ErrorList
	for _, n := range names {
		if msgs := n.valid(n.name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fld, value, fmt.Sprintf(
				"the provider names the %s %q after it, which cannot be created: %s (multi-tenancy rule %s)",
				n.kind, n.name, strings.Join(msgs, "; "), tenancy.RuleDerivedNameTooLong)))
		}
	}
	return errs
}

// validateClusterNames checks the names derived from a KubevirtCluster's:
// its control-plane Service (a DNS-1035 label: at most 60 characters
// before "-lb", starting with a letter) and NetworkPolicies.
func validateClusterNames(name string) field.ErrorList {
	kc := &infrav1.KubevirtCluster{}
	kc.Name = name
	names := []derivedName{
		{kind: "control-plane Service", name: controlplaneservice.Name(kc), valid: validation.IsDNS1035Label},
		{kind: "NetworkPolicy", name: isolation.LoadBalancersName(kc), valid: validation.IsDNS1123Subdomain},
	}
	return validateDerivedNames(field.NewPath("metadata", "name"), name, names)
}

// validateMachineNames checks the names derived from a KubevirtMachine's:
// its VM's root and data disk DataVolumes, DNS-1123 labels as CDI's
// webhook requires.
func validateMachineNames(name string, spec *infrav1.KubevirtMachineSpec) field.ErrorList {
	var names []derivedName
	if spec.RootDisk != nil {
		names = append(names, derivedName{kind: "root disk DataVolume", name: vmbuilder.DataVolumeName(name, goldenplan.RootDiskName), valid: validation.IsDNS1123Label})
	}
	for _, d := range spec.DataDisks {
		names = append(names, derivedName{kind: "data disk DataVolume", name: vmbuilder.DataVolumeName(name, d.Name), valid: validation.IsDNS1123Label})
	}
	return validateDerivedNames(field.NewPath("metadata", "name"), name, names)
}

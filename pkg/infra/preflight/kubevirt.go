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

package preflight

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API group versions the checks look for.
const (
	kubeVirtAPI = "kubevirt.io/v1"
	cdiAPI      = "cdi.kubevirt.io/v1beta1"
	poolAPI     = "pool.kubevirt.io/v1beta1"
	multusAPI   = "k8s.cni.cncf.io/v1"
)

// cdiDeployed is the phase cdi-operator reports once CDI runs
// (controller-lifecycle-operator-sdk's PhaseDeployed).
const cdiDeployed = "Deployed"

// The oldest versions the provider supports (docs/versions.md).
var (
	minKubeVirt = version.MustParseGeneric("1.2.0")
	minCDI      = version.MustParseGeneric("1.58.0")
)

// The KubeVirt feature gates provider features need, off in a stock
// install (KubeVirt v1.7 pkg/virt-config/featuregate/active.go: both
// Alpha).
const (
	expandDisksGate = "ExpandDisks"
)

// Reasons of the KubeVirt and CDI findings.
const (
	KubeVirtNotInstalledReason = "KubeVirtNotInstalled"
	KubeVirtNotDeployedReason  = "KubeVirtNotDeployed"
	KubeVirtTooOldReason       = "KubeVirtTooOld"
	KubeVirtDeployedReason     = "KubeVirtDeployed"
	FeatureGateMissingReason   = "FeatureGateMissing"
	FeatureGateOnReason        = "FeatureGateOn"
	LiveMigrateOffReason       = "LiveMigrateNotAWorkloadUpdateMethod"
	LiveMigrateOnReason        = "LiveMigrateWorkloadUpdates"
	PoolsNotServedReason       = "VirtualMachinePoolsNotServed"
	PoolsServedReason          = "VirtualMachinePoolsServed"
	CDINotInstalledReason      = "CDINotInstalled"
	CDINotDeployedReason       = "CDINotDeployed"
	CDITooOldReason            = "CDITooOld"
	CDIDeployedReason          = "CDIDeployed"
	ReadFailedReason           = "ReadFailed"
	MultusInstalledReason      = "MultusInstalled"
	MultusNotInstalledReason   = "MultusNotInstalled"
)

// servedAPIs are the group versions among those the checks need that the
// cluster serves; a discovery error leaves a group version out.
func servedAPIs(disc discovery.DiscoveryInterface) sets.Set[string] {
	served := sets.New[string]()
	for _, gv := range []string{kubeVirtAPI, cdiAPI, poolAPI, multusAPI} {
		if list, err := disc.ServerResourcesForGroupVersion(gv); err == nil && len(list.APIResources) > 0 {
			served.Insert(gv)
		}
	}
	return served
}

// readKubeVirt returns the KubeVirt CR, nil when there is none.
func readKubeVirt(ctx context.Context, c client.Client, served sets.Set[string]) (*kubevirtv1.KubeVirt, error) {
	if !served.Has(kubeVirtAPI) {
		return nil, nil
	}
	list := &kubevirtv1.KubeVirtList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) == 0 {
		return nil, err
	}
	return &list.Items[0], nil
}

// readCDI returns the CDI CR, nil when there is none.
func readCDI(ctx context.Context, c client.Client, served sets.Set[string]) (*cdiv1.CDI, error) {
	if !served.Has(cdiAPI) {
		return nil, nil
	}
	list := &cdiv1.CDIList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) == 0 {
		return nil, err
	}
	return &list.Items[0], nil
}

// kubeVirtFindings judges the KubeVirt install and the configuration each
// feature needs.
func kubeVirtFindings(kv *kubevirtv1.KubeVirt, served sets.Set[string], err error) []Finding {
	switch {
	case !served.Has(kubeVirtAPI):
		return []Finding{{"kubevirt", Error, KubeVirtNotInstalledReason,
			"the cluster does not serve " + kubeVirtAPI + ": install KubeVirt; no machine can run"}}
	case err != nil:
		return []Finding{{"kubevirt", Error, ReadFailedReason, "reading the KubeVirt CR: " + err.Error()}}
	case kv == nil:
		return []Finding{{"kubevirt", Error, KubeVirtNotDeployedReason,
			"the cluster serves " + kubeVirtAPI + " but has no KubeVirt CR: virt-operator has nothing to deploy"}}
	}
	name := kv.Namespace + "/" + kv.Name
	var out []Finding
	if kv.Status.Phase != kubevirtv1.KubeVirtPhaseDeployed {
		out = append(out, Finding{"kubevirt", Error, KubeVirtNotDeployedReason,
			fmt.Sprintf("KubeVirt %s is in phase %q, not Deployed", name, kv.Status.Phase)})
	} else {
		out = append(out, versionFinding("kubevirt", "KubeVirt", name, kv.Status.ObservedKubeVirtVersion, minKubeVirt,
			KubeVirtDeployedReason, KubeVirtTooOldReason))
	}
	if served.Has(poolAPI) {
		out = append(out, Finding{"machinepools", OK, PoolsServedReason, "VirtualMachinePools (" + poolAPI + ") are served"})
	} else {
		out = append(out, Finding{"machinepools", Warning, PoolsNotServedReason,
			"the cluster does not serve " + poolAPI + " (KubeVirt 1.7 or later): KubevirtMachinePools wait with VirtualMachinePoolsNotServed; MachineDeployments work"})
	}
	var gates []string
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil {
		gates = dc.FeatureGates
	}
	// No gate for Ignition: the provider hands it over on a config drive,
	// which KubeVirt serves without ExperimentalIgnitionSupport (that gate
	// guards only the kubevirt.io/ignitiondata annotation).
	out = append(out,
		gateFinding("disk-growth", name, gates, expandDisksGate, "a root disk size change rolls the machine instead of growing its disk in place"))
	if slices.Contains(kv.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods, kubevirtv1.WorkloadUpdateMethodLiveMigrate) {
		out = append(out, Finding{"live-migration", OK, LiveMigrateOnReason,
			"KubeVirt " + name + " moves running VMs onto a changed spec by live migration (in-place CPU and memory)"})
	} else {
		out = append(out, Finding{"live-migration", Warning, LiveMigrateOffReason,
			"KubeVirt " + name + " lacks LiveMigrate in spec.workloadUpdateStrategy.workloadUpdateMethods: in-place CPU and memory changes roll the machine"})
	}
	return out
}

// gateFinding says whether a feature gate is on, and what is lost without it.
func gateFinding(check, kv string, gates []string, gate, without string) Finding {
	if slices.Contains(gates, gate) {
		return Finding{check, OK, FeatureGateOnReason, fmt.Sprintf("KubeVirt %s has the %s feature gate on", kv, gate)}
	}
	return Finding{check, Warning, FeatureGateMissingReason, fmt.Sprintf(
		"KubeVirt %s lacks the %s feature gate (spec.configuration.developerConfiguration.featureGates): %s", kv, gate, without)}
}

// versionFinding judges an observed version against the oldest supported
// one; an unreported version is only Info.
func versionFinding(check, product, name, observed string, minimum *version.Version, okReason, oldReason string) Finding {
	v, err := version.ParseGeneric(observed)
	switch {
	case observed == "" || err != nil:
		return Finding{check, Info, okReason, fmt.Sprintf("%s %s is deployed; its operator reports no version", product, name)}
	case v.LessThan(minimum):
		return Finding{check, Warning, oldReason, fmt.Sprintf("%s %s runs %s, older than the %s the provider supports", product, name, observed, minimum)}
	}
	return Finding{check, OK, okReason, fmt.Sprintf("%s %s runs %s", product, name, observed)}
}

// cdiFindings judges the CDI install.
func cdiFindings(cdi *cdiv1.CDI, served sets.Set[string], err error) []Finding {
	switch {
	case !served.Has(cdiAPI):
		return []Finding{{"cdi", Error, CDINotInstalledReason,
			"the cluster does not serve " + cdiAPI + ": install CDI; no root disk can be imported or cloned"}}
	case err != nil:
		return []Finding{{"cdi", Error, ReadFailedReason, "reading the CDI CR: " + err.Error()}}
	case cdi == nil:
		return []Finding{{"cdi", Error, CDINotDeployedReason,
			"the cluster serves " + cdiAPI + " but has no CDI CR: cdi-operator has nothing to deploy"}}
	case cdi.Status.Phase != cdiDeployed:
		return []Finding{{"cdi", Error, CDINotDeployedReason, fmt.Sprintf("CDI %s is in phase %q, not Deployed", cdi.Name, cdi.Status.Phase)}}
	}
	return []Finding{versionFinding("cdi", "CDI", cdi.Name, cdi.Status.ObservedVersion, minCDI, CDIDeployedReason, CDITooOldReason)}
}

// multusFinding says whether NetworkAttachmentDefinitions are served.
func multusFinding(served sets.Set[string]) Finding {
	if served.Has(multusAPI) {
		return Finding{"multus", OK, MultusInstalledReason, "NetworkAttachmentDefinitions (" + multusAPI + ") are served, for the multus flavors"}
	}
	return Finding{"multus", Info, MultusNotInstalledReason,
		"the cluster does not serve " + multusAPI + ": the multus and multus-ipam flavors' VMs cannot attach secondary networks"}
}

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
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// reasons are the check/severity/reason triples of findings, for
// comparing without the messages.
func reasons(fs []Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Check+"/"+string(f.Severity)+"/"+f.Reason)
	}
	return out
}

func sameReasons(t *testing.T, got []Finding, want ...string) {
	t.Helper()
	if g := strings.Join(reasons(got), " "); g != strings.Join(want, " ") {
		t.Errorf("findings %s, want %s\n%+v", g, strings.Join(want, " "), got)
	}
}

func kubeVirt(phase kubevirtv1.KubeVirtPhase, version string, gates []string, methods ...kubevirtv1.WorkloadUpdateMethod) *kubevirtv1.KubeVirt {
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt"}}
	kv.Status.Phase, kv.Status.ObservedKubeVirtVersion = phase, version
	kv.Spec.Configuration.DeveloperConfiguration = &kubevirtv1.DeveloperConfiguration{FeatureGates: gates}
	kv.Spec.WorkloadUpdateStrategy.WorkloadUpdateMethods = methods
	return kv
}

func TestKubeVirtFindings(t *testing.T) {
	all := sets.New(kubeVirtAPI, cdiAPI, poolAPI)
	live := kubevirtv1.WorkloadUpdateMethodLiveMigrate
	for _, tc := range []struct {
		name   string
		kv     *kubevirtv1.KubeVirt
		served sets.Set[string]
		err    error
		want   []string
	}{
		{"not served", nil, sets.New(cdiAPI), nil, []string{"kubevirt/Error/KubeVirtNotInstalled"}},
		{"no CR", nil, all, nil, []string{"kubevirt/Error/KubeVirtNotDeployed"}},
		{"unreadable", nil, all, errors.New("forbidden"), []string{"kubevirt/Error/ReadFailed"}},
		{"everything on", kubeVirt(kubevirtv1.KubeVirtPhaseDeployed, "v1.7.0", []string{"ExpandDisks", "ExperimentalIgnitionSupport"}, live), all, nil,
			[]string{"kubevirt/OK/KubeVirtDeployed", "machinepools/OK/VirtualMachinePoolsServed", "disk-growth/OK/FeatureGateOn", "live-migration/OK/LiveMigrateWorkloadUpdates"}},
		{"stock install", kubeVirt(kubevirtv1.KubeVirtPhaseDeployed, "v1.6.2", nil), sets.New(kubeVirtAPI, cdiAPI), nil,
			[]string{"kubevirt/OK/KubeVirtDeployed", "machinepools/Warning/VirtualMachinePoolsNotServed", "disk-growth/Warning/FeatureGateMissing", "live-migration/Warning/LiveMigrateNotAWorkloadUpdateMethod"}},
		{"too old", kubeVirt(kubevirtv1.KubeVirtPhaseDeployed, "v1.1.1", []string{"ExpandDisks", "ExperimentalIgnitionSupport"}, live), all, nil,
			[]string{"kubevirt/Warning/KubeVirtTooOld", "machinepools/OK/VirtualMachinePoolsServed", "disk-growth/OK/FeatureGateOn", "live-migration/OK/LiveMigrateWorkloadUpdates"}},
		{"deploying", kubeVirt(kubevirtv1.KubeVirtPhaseDeploying, "", []string{"ExpandDisks", "ExperimentalIgnitionSupport"}, live), all, nil,
			[]string{"kubevirt/Error/KubeVirtNotDeployed", "machinepools/OK/VirtualMachinePoolsServed", "disk-growth/OK/FeatureGateOn", "live-migration/OK/LiveMigrateWorkloadUpdates"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameReasons(t, kubeVirtFindings(tc.kv, tc.served, tc.err), tc.want...)
		})
	}
	f := kubeVirtFindings(kubeVirt(kubevirtv1.KubeVirtPhaseDeployed, "v1.7.0", []string{"ExperimentalIgnitionSupport"}, live), all, nil)[2]
	if !strings.Contains(f.Message, "ExpandDisks") || !strings.Contains(f.Message, "spec.configuration.developerConfiguration.featureGates") {
		t.Errorf("a missing gate's message names neither the gate nor where it goes: %s", f.Message)
	}
}

func TestCDIFindings(t *testing.T) {
	deployed := func(v string) *cdiv1.CDI {
		c := &cdiv1.CDI{ObjectMeta: metav1.ObjectMeta{Name: "cdi"}}
		c.Status.Phase, c.Status.ObservedVersion = cdiDeployed, v
		return c
	}
	all := sets.New(kubeVirtAPI, cdiAPI)
	for _, tc := range []struct {
		name   string
		cdi    *cdiv1.CDI
		served sets.Set[string]
		want   string
	}{
		{"not served", nil, sets.New(kubeVirtAPI), "cdi/Error/CDINotInstalled"},
		{"no CR", nil, all, "cdi/Error/CDINotDeployed"},
		{"deployed", deployed("v1.64.0"), all, "cdi/OK/CDIDeployed"},
		{"no version", deployed(""), all, "cdi/Info/CDIDeployed"},
		{"too old", deployed("v1.57.0"), all, "cdi/Warning/CDITooOld"},
		{"deploying", &cdiv1.CDI{ObjectMeta: metav1.ObjectMeta{Name: "cdi"}}, all, "cdi/Error/CDINotDeployed"},
	} {
		t.Run(tc.name, func(t *testing.T) { sameReasons(t, cdiFindings(tc.cdi, tc.served, nil), tc.want) })
	}
}

func profile(class string, method cdiv1.CDICloneStrategy, modes ...corev1.PersistentVolumeAccessMode) cdiv1.StorageProfile {
	p := cdiv1.StorageProfile{ObjectMeta: metav1.ObjectMeta{Name: class}}
	p.Status.CloneStrategy = &method
	if len(modes) > 0 {
		p.Status.ClaimPropertySets = []cdiv1.ClaimPropertySet{{AccessModes: modes}}
	}
	return p
}

func TestStorageFindings(t *testing.T) {
	class := func(name string) storagev1.StorageClass {
		return storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	rwo, rwx := corev1.ReadWriteOnce, corev1.ReadWriteMany
	profiles := func(ps ...cdiv1.StorageProfile) map[string]cdiv1.StorageProfile {
		m := map[string]cdiv1.StorageProfile{}
		for _, p := range ps {
			m[p.Name] = p
		}
		return m
	}
	copyOverride := &cdiv1.CDI{Spec: cdiv1.CDISpec{CloneStrategyOverride: ptr.To(cdiv1.CloneStrategyHostAssisted)}}
	for _, tc := range []struct {
		name string
		s    storage
		cdi  *cdiv1.CDI
		want []string
	}{
		{"no class", storage{}, nil, []string{"storage/Error/NoStorageClass"}},
		{"csi clone and RWX", storage{[]storagev1.StorageClass{class("a"), class("b")},
			profiles(profile("a", cdiv1.CloneStrategyHostAssisted, rwo), profile("b", cdiv1.CloneStrategyCsiClone, rwo, rwx))}, nil,
			[]string{"storage/Info/CloneMethod", "storage/OK/CloneMethod", "live-migration/OK/ReadWriteManyStorage"}},
		{"copy only, RWO only", storage{[]storagev1.StorageClass{class("a")}, profiles(profile("a", cdiv1.CloneStrategyHostAssisted, rwo))}, nil,
			[]string{"storage/Info/CloneMethod", "storage/Warning/CopyOnlyStorage", "live-migration/Warning/NoReadWriteManyStorage"}},
		{"CDI copies whatever the profile says", storage{[]storagev1.StorageClass{class("a")}, profiles(profile("a", cdiv1.CloneStrategySnapshot, rwx))}, copyOverride,
			[]string{"storage/Info/CloneMethod", "storage/Warning/CopyOnlyStorage", "live-migration/OK/ReadWriteManyStorage"}},
		{"a profile without modes", storage{[]storagev1.StorageClass{class("a")}, profiles(profile("a", cdiv1.CloneStrategySnapshot))}, nil,
			[]string{"storage/OK/CloneMethod", "storage/Warning/StorageProfileIncomplete", "live-migration/Warning/NoReadWriteManyStorage"}},
		{"no profile yet", storage{[]storagev1.StorageClass{class("a")}, profiles()}, nil,
			[]string{"storage/Info/CloneMethod"}},
	} {
		t.Run(tc.name, func(t *testing.T) { sameReasons(t, storageFindings(tc.s, tc.cdi, nil), tc.want...) })
	}
}

func dnsService(ns, name string, selector map[string]string) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 53}}}}
}

func withTarget(svc corev1.Service, target intstr.IntOrString) corev1.Service {
	svc.Spec.Ports[0].TargetPort = target
	return svc
}

func TestDNSFindings(t *testing.T) {
	nsLabels := map[string]map[string]string{
		"kube-system":   {corev1.LabelMetadataName: "kube-system"},
		"openshift-dns": {corev1.LabelMetadataName: "openshift-dns"},
	}
	for _, tc := range []struct {
		name string
		d    dnsSetup
		want []string
	}{
		{"kubeadm's CoreDNS", dnsSetup{services: []corev1.Service{dnsService("kube-system", "kube-dns", map[string]string{"k8s-app": "kube-dns"})}, namespaceLabels: nsLabels},
			[]string{"dns/OK/DNSOpen"}},
		{"OpenShift's pods on 5353", dnsSetup{services: []corev1.Service{withTarget(dnsService("openshift-dns", "dns-default", map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}), intstr.FromInt32(5353))}, namespaceLabels: nsLabels},
			[]string{"dns/OK/DNSOpen"}},
		{"OpenShift's labels on port 53", dnsSetup{services: []corev1.Service{dnsService("openshift-dns", "dns-default", map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"})}, namespaceLabels: nsLabels},
			[]string{"dns/Warning/DNSBlocked"}},
		{"CoreDNS's chart", dnsSetup{services: []corev1.Service{dnsService("kube-system", "coredns", map[string]string{"app.kubernetes.io/name": "coredns", "k8s-app": "coredns"})}, namespaceLabels: nsLabels},
			[]string{"dns/Warning/DNSBlocked"}},
		{"kube-dns labels in another namespace", dnsSetup{services: []corev1.Service{dnsService("openshift-dns", "kube-dns", map[string]string{"k8s-app": "kube-dns"})}, namespaceLabels: nsLabels},
			[]string{"dns/Warning/DNSBlocked"}},
		{"NodeLocal DNSCache on its link-local address", dnsSetup{nodeLocalAddresses: []string{"169.254.20.10"}, namespaceLabels: nsLabels},
			[]string{"dns/OK/DNSOpen"}},
		{"NodeLocal DNSCache on the Service address too", dnsSetup{
			services:           []corev1.Service{dnsService("kube-system", "kube-dns", map[string]string{"k8s-app": "kube-dns"})},
			nodeLocalAddresses: []string{"169.254.20.10", "10.96.0.10"}, namespaceLabels: nsLabels},
			[]string{"dns/OK/DNSOpen", "dns/OK/DNSOpen", "dns/Warning/DNSBlocked"}},
		{"nothing", dnsSetup{namespaceLabels: nsLabels}, []string{"dns/Warning/DNSNotFound"}},
		{"kube-dns pods serving on another port", dnsSetup{services: []corev1.Service{withTarget(dnsService("kube-system", "kube-dns", map[string]string{"k8s-app": "kube-dns"}), intstr.FromInt32(1053))}, namespaceLabels: nsLabels},
			[]string{"dns/Warning/DNSBlocked"}},
		{"OpenShift's named target port", dnsSetup{services: []corev1.Service{withTarget(dnsService("openshift-dns", "dns-default", map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}), intstr.FromString("dns"))}, namespaceLabels: nsLabels},
			[]string{"dns/OK/DNSOpen"}},
	} {
		t.Run(tc.name, func(t *testing.T) { sameReasons(t, dnsFindings(tc.d, nil), tc.want...) })
	}
}

func TestLocalIPs(t *testing.T) {
	ds := func(args ...string) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node-cache", Args: args}}
		return d
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-localip", "169.254.20.10,10.96.0.10", "-conf", "/etc/Corefile"}, "169.254.20.10,10.96.0.10"},
		{[]string{"--localip=169.254.20.10"}, "169.254.20.10"},
		{[]string{"-conf", "/etc/Corefile"}, ""},
	} {
		if got := strings.Join(localIPs(ds(tc.args...)), ","); got != tc.want {
			t.Errorf("localIPs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

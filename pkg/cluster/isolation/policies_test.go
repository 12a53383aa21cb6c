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

package isolation

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func kcWith(mutate func(*infrav1.KubevirtCluster)) *infrav1.KubevirtCluster {
	kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "blue-kc", Namespace: "tenants"}}
	if mutate != nil {
		mutate(kc)
	}
	return kc
}

func byName(t *testing.T, kc *infrav1.KubevirtCluster, opts Options) map[string]*networkingv1.NetworkPolicy {
	t.Helper()
	policies, err := Desired(kc, "blue", "infra-ns", opts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range policies {
		if p.Namespace != "infra-ns" {
			t.Errorf("policy %s in namespace %s", p.Name, p.Namespace)
		}
		out[p.Name] = p
	}
	return out
}

// internet returns the egress rule with 0.0.0.0/0 or ::/0 blocks.
func internet(p *networkingv1.NetworkPolicy) map[string][]string {
	out := map[string][]string{}
	for _, r := range p.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil && (to.IPBlock.CIDR == "0.0.0.0/0" || to.IPBlock.CIDR == "::/0") {
				out[to.IPBlock.CIDR] = to.IPBlock.Except
			}
		}
	}
	return out
}

func TestDesiredDefaults(t *testing.T) {
	got := byName(t, kcWith(nil), Options{ProviderNamespace: "capkv-system"})
	iso, api := got["blue-kc-isolation"], got["blue-kc-api-server"]
	if iso == nil || api == nil || len(got) != 2 {
		t.Fatalf("policies %v", got)
	}
	sel := iso.Spec.PodSelector.MatchLabels
	if sel[infrav1.ClusterNameLabel] != "blue" || sel[infrav1.KubevirtMachineNamespaceLabel] != "tenants" || sel[LauncherLabel] != LauncherValue {
		t.Errorf("selector %v", sel)
	}
	if api.Spec.PodSelector.MatchLabels[infrav1.RoleLabel] != infrav1.RoleControlPlane || len(api.Spec.Ingress[0].From) != 0 ||
		api.Spec.Ingress[0].Ports[0].Port.IntVal != 6443 {
		t.Errorf("api-server policy %+v", api.Spec)
	}
	blocks := internet(iso)
	if len(blocks["0.0.0.0/0"]) != 5 || len(blocks["::/0"]) != 2 {
		t.Errorf("internet egress %v", blocks)
	}
	if len(iso.Spec.Ingress) != 2 || iso.Spec.Ingress[1].Ports[0].Port.IntVal != 22 ||
		iso.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "capkv-system" {
		t.Errorf("ingress %+v", iso.Spec.Ingress)
	}
	if len(byName(t, kcWith(nil), Options{})["blue-kc-isolation"].Spec.Ingress) != 1 {
		t.Error("port 22 opened without a provider namespace")
	}
}

func TestDesiredOptions(t *testing.T) {
	kc := kcWith(func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Isolation.DeniedCIDRs = []string{"10.0.0.0/8", "fd00::/8"}
		kc.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.53.0.10", "fd00::53"}}
		kc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "192.168.7.7", Port: 443}
		kc.Spec.ControlPlaneServiceTemplate.Spec.TargetPort = 8443
		kc.Spec.Isolation.APIServerClients = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}}
	})
	got := byName(t, kc, Options{DeniedCIDRs: []string{"1.2.3.0/24"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}})
	iso, api := got["blue-kc-isolation"], got["blue-kc-api-server"]
	blocks := internet(iso)
	if len(blocks) != 1 || len(blocks["0.0.0.0/0"]) != 1 || blocks["0.0.0.0/0"][0] != "10.0.0.0/8" {
		t.Errorf("cluster's denied ranges replace the manager's, IPv4 only: %v", blocks)
	}
	dns := iso.Spec.Egress[1]
	if n := len(DefaultDNSResolvers()); len(dns.To) != n+2 || dns.To[n].IPBlock.CIDR != "10.53.0.10/32" || dns.To[n+1].IPBlock.CIDR != "fd00::53/128" || len(dns.Ports) != 2 {
		t.Errorf("DNS rule %+v", dns)
	}
	last := iso.Spec.Egress[len(iso.Spec.Egress)-1]
	if last.To[0].IPBlock == nil || last.To[0].IPBlock.CIDR != "192.168.7.7/32" || last.Ports[0].Port.IntVal != 443 {
		t.Errorf("endpoint rule %+v", last)
	}
	if api.Spec.Ingress[0].Ports[0].Port.IntVal != 8443 || api.Spec.Ingress[0].From[0].IPBlock.CIDR != "198.51.100.0/24" {
		t.Errorf("api-server policy %+v", api.Spec.Ingress)
	}
	kc.Spec.Isolation.DeniedCIDRs = []string{"not-a-cidr"}
	if _, err := Desired(kc, "blue", "infra-ns", Options{}); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

func TestDesiredCustomAndDisabled(t *testing.T) {
	kc := kcWith(func(kc *infrav1.KubevirtCluster) {
		kc.Spec.Isolation.Mode = infrav1.IsolationDisabled
		kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{{Name: "scrape", Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{infrav1.ClusterNameLabel: "other-tenant", "role": "x"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}},
		}}}
	})
	got := byName(t, kc, Options{})
	custom := got["blue-kc-scrape"]
	if len(got) != 1 || custom == nil {
		t.Fatalf("disabled isolation keeps only custom policies: %v", got)
	}
	sel := custom.Spec.PodSelector.MatchLabels
	if sel[infrav1.ClusterNameLabel] != "blue" || sel["role"] != "x" || sel[LauncherLabel] != LauncherValue {
		t.Errorf("custom selector not narrowed to the cluster: %v", sel)
	}
	if len(custom.Spec.PolicyTypes) != 1 || custom.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress ||
		ptr.Deref(custom.Spec.Ingress[0].Ports[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("API defaults not filled in: %+v", custom.Spec)
	}
	if kc.Spec.CustomNetworkPolicies[0].Spec.PodSelector.MatchLabels[infrav1.ClusterNameLabel] != "other-tenant" {
		t.Error("Desired modified the spec")
	}
}

func TestTenantCloudOpensTheInfraAPIAndNodePorts(t *testing.T) {
	infraAPI := []HostPort{{Host: "10.96.0.1", Port: 443}, {Host: "192.168.10.5", Port: 6443}, {Host: "api.example.com", Port: 443}}
	opened := func(p *networkingv1.NetworkPolicy) []string {
		var out []string
		for _, r := range p.Spec.Egress {
			if len(r.To) == 1 && r.To[0].IPBlock != nil && len(r.Ports) == 1 {
				out = append(out, r.To[0].IPBlock.CIDR+":"+r.Ports[0].Port.String())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		components    []infrav1.TenantCloudComponent
		wantOpened    []string
		loadBalancers bool
	}{
		{"no tenant credential", nil, nil, false},
		{"the CSI driver", []infrav1.TenantCloudComponent{infrav1.TenantCSIDriver}, []string{"10.96.0.1/32:443", "192.168.10.5/32:6443"}, false},
		{"the cloud controller manager", []infrav1.TenantCloudComponent{infrav1.TenantCloudControllerManager},
			[]string{"10.96.0.1/32:443", "192.168.10.5/32:6443"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policies := byName(t, kcWith(func(kc *infrav1.KubevirtCluster) { kc.Spec.TenantCloud.Components = tc.components }),
				Options{InfraAPI: infraAPI})
			iso := policies["blue-kc-isolation"]
			if got := opened(iso); !slices.Equal(got, tc.wantOpened) {
				t.Errorf("egress opened to %v, want %v (host names cannot be opened)", got, tc.wantOpened)
			}
			lb, ok := policies["blue-kc-load-balancers"]
			if ok != tc.loadBalancers {
				t.Fatalf("load-balancers policy present: %v, want %v", ok, tc.loadBalancers)
			}
			if !ok {
				return
			}
			if lb.Spec.PodSelector.MatchLabels[infrav1.RoleLabel] != infrav1.RoleWorker {
				t.Errorf("selects %v, want the workers", lb.Spec.PodSelector.MatchLabels)
			}
			rule := lb.Spec.Ingress[0]
			if len(rule.From) != 0 || len(rule.Ports) != 2 {
				t.Fatalf("ingress %+v, want from anywhere on two port ranges", rule)
			}
			for _, p := range rule.Ports {
				if p.Port.IntVal != 30000 || *p.EndPort != 32767 {
					t.Errorf("port range %v-%v, want the node port range", p.Port, *p.EndPort)
				}
			}
		})
	}
}

func TestDefaultDNSResolvers(t *testing.T) {
	iso := byName(t, kcWith(nil), Options{})["blue-kc-isolation"]
	dns, openshift := iso.Spec.Egress[1], iso.Spec.Egress[2]
	if len(dns.To) != 2 || dns.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" ||
		dns.To[1].IPBlock == nil || dns.To[1].IPBlock.CIDR != "169.254.20.10/32" || dns.Ports[0].Port.IntVal != 53 {
		t.Errorf("default DNS rule: kube-dns pods and NodeLocal DNSCache on 53, got %+v", dns)
	}
	if len(openshift.To) != 1 || openshift.To[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "openshift-dns" ||
		len(openshift.Ports) != 2 || openshift.Ports[0].Port.IntVal != 5353 {
		t.Errorf("OpenShift's DNS pods on 5353, got %+v", openshift)
	}

	own := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}}}
	iso = byName(t, kcWith(func(kc *infrav1.KubevirtCluster) { kc.Spec.Isolation.DNSResolvers = own }), Options{})["blue-kc-isolation"]
	for _, r := range iso.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil && p.IPBlock.CIDR == "169.254.20.10/32" || p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == "openshift-dns" {
				t.Errorf("a cluster's own dnsResolvers replace the defaults, got %+v", r)
			}
		}
	}
}

// TestSSHCheckSources opens port 22 of the VMs to the ranges the ssh check
// comes from when the provider runs on another cluster, beside its
// namespace, and refuses a range that is not one.
func TestSSHCheckSources(t *testing.T) {
	kc := kcWith(func(*infrav1.KubevirtCluster) {})
	got := byName(t, kc, Options{ProviderNamespace: "capkv-system", SSHCheckSources: []string{"192.0.2.0/24", " 2001:db8::1/128"}})
	ingress := got["blue-kc-isolation"].Spec.Ingress
	if len(ingress) != 2 || len(ingress[1].Ports) != 1 || ingress[1].Ports[0].Port.IntVal != 22 {
		t.Fatalf("ingress %+v", ingress)
	}
	from := ingress[1].From
	if len(from) != 3 || from[0].NamespaceSelector == nil || from[1].IPBlock.CIDR != "192.0.2.0/24" || from[2].IPBlock.CIDR != "2001:db8::1/128" {
		t.Errorf("port 22 is open to %+v", from)
	}
	if only := byName(t, kc, Options{SSHCheckSources: []string{"198.51.100.7/32"}})["blue-kc-isolation"].Spec.Ingress; len(only) != 2 || len(only[1].From) != 1 {
		t.Errorf("without a provider namespace, port 22 is open to %+v", only)
	}
	if closed := byName(t, kc, Options{})["blue-kc-isolation"].Spec.Ingress; len(closed) != 1 {
		t.Errorf("with neither, port 22 is open: %+v", closed)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.1/24", "fe80::1%eth0/64"} {
		if _, err := Desired(kc, "blue", "infra-ns", Options{SSHCheckSources: []string{bad}}); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

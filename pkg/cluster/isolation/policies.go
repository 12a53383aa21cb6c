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

// Package isolation builds the NetworkPolicies that isolate a tenant
// cluster's VMs on the infra cluster, and keeps them there. The policies
// select only the cluster's virt-launcher pods, so CDI's importer, cloner and
// upload pods are never restricted by them. docs/isolation.md has the flow
// table the tests check.
package isolation

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// DefaultDeniedCIDRs are the ranges VMs may not reach unless configured
// otherwise: private (RFC 1918, RFC 4193), shared (RFC 6598) and link-local
// ranges, where infra pods, Services, nodes and metadata services live.
var DefaultDeniedCIDRs = []string{
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
	"fc00::/7", "fe80::/10",
}

// NodeLocalDNSAddress is the link-local address NodeLocal DNSCache listens
// on in Kubernetes' documented install (kubernetes.io, "Using NodeLocal
// DNSCache in Kubernetes Clusters"), inside the denied 169.254.0.0/16.
const NodeLocalDNSAddress = "169.254.20.10"

// DefaultDNSResolvers are the resolvers VMs may ask on port 53 when a
// cluster names none: the kube-dns pods (CoreDNS as kubeadm and most
// distributions install it) and NodeLocal DNSCache's address, which a
// launcher pod's resolv.conf names instead of the DNS Service where the
// cache runs.
func DefaultDNSResolvers() []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{
		podsOf(metav1.NamespaceSystem, "k8s-app", "kube-dns"),
		{IPBlock: &networkingv1.IPBlock{CIDR: NodeLocalDNSAddress + "/32"}},
	}
}

// DefaultDNSRules are the egress rules that open DNS when a cluster names
// no resolvers: port 53 of DefaultDNSResolvers, and OpenShift's DNS pods.
func DefaultDNSRules() []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{dnsRule(DefaultDNSResolvers()), openShiftDNS()}
}

// dnsRule opens port 53, UDP and TCP, of the resolvers.
func dnsRule(resolvers []networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{To: resolvers, Ports: []networkingv1.NetworkPolicyPort{udp(53), tcp(53)}}
}

// openShiftDNS is OpenShift's DNS: its pods serve on port 5353 behind the
// dns-default Service's port 53, and policies apply after the Service
// address is translated, so they are opened on 5353 (OpenShift's DNS
// operator, the dns-default DaemonSet).
func openShiftDNS() networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{podsOf("openshift-dns", "dns.operator.openshift.io/daemonset-dns", "default")},
		Ports: []networkingv1.NetworkPolicyPort{udp(5353), tcp(5353)},
	}
}

// podsOf selects the pods labelled key=value in namespace ns.
func podsOf(ns, key, value string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
	}
}

// LauncherLabel and LauncherValue mark every virt-launcher pod (docs/kubevirt-behaviour.md#the-virt-launcher-pod-carries-the-vmi-labels-and-placement).
const (
	LauncherLabel = "kubevirt.io"
	LauncherValue = "virt-launcher"
)

// Options are the provider-wide settings of isolation.
type Options struct {
	// DeniedCIDRs apply to clusters that set none; empty means
	// DefaultDeniedCIDRs.
	DeniedCIDRs []string
	// IPFamilies are the infra cluster's IP families; internet egress is
	// opened for each. Empty means both.
	IPFamilies []corev1.IPFamily
	// ProviderNamespace is where the provider runs on the management
	// cluster; its pods may reach port 22 of the VMs for the ssh bootstrap
	// check. Empty leaves the port closed.
	ProviderNamespace string
	// SSHCheckSources are the address ranges from which the ssh bootstrap
	// check's connections reach the VMs when they do not come from a pod
	// of ProviderNamespace on the infra cluster: a provider on another
	// (management) cluster, dialing directly from its nodes or through a
	// gateway. They may reach port 22 of the VMs too.
	SSHCheckSources []string
	// InfraAPI are the addresses at which the VMs reach the infra API
	// server, set per cluster: a cluster that asks for a tenant credential
	// (docs/tenant-cloud.md) may reach them, since its cloud components
	// work there.
	InfraAPI []HostPort
}

// HostPort is an IP address and a TCP port.
type HostPort struct {
	Host string
	Port int32
}

// NodePortRange is the tenant's default Service node port range, where the
// infra load balancers of the tenant's cloud provider send traffic.
const (
	NodePortRangeStart int32 = 30000
	NodePortRangeEnd   int32 = 32767
)

// PolicyName is the name of the main isolation policy.
func PolicyName(kc *infrav1.KubevirtCluster) string { return kc.Name + "-isolation" }

// APIServerName is the name of the policy opening the API server port.
func APIServerName(kc *infrav1.KubevirtCluster) string { return kc.Name + "-api-server" }

// CustomName is the name of a custom policy.
func CustomName(kc *infrav1.KubevirtCluster, name string) string { return kc.Name + "-" + name }

// LoadBalancersName names the policy that lets the infra load balancers of
// the tenant's cloud provider reach the worker VMs.
func LoadBalancersName(kc *infrav1.KubevirtCluster) string { return kc.Name + "-load-balancers" }

// Enabled reports whether the cluster wants isolation policies.
func Enabled(kc *infrav1.KubevirtCluster) bool {
	return kc.Spec.Isolation.Mode != infrav1.IsolationDisabled
}

// PodSelector selects the virt-launcher pods of the cluster's VMs.
func PodSelector(clusterName, kcNamespace string) map[string]string {
	sel := vmbuilder.ClusterSelector(clusterName, kcNamespace)
	sel[LauncherLabel] = LauncherValue
	return sel
}

// Desired returns every NetworkPolicy the cluster wants in infra namespace
// ns: the two isolation policies unless disabled, and the custom ones.
func Desired(kc *infrav1.KubevirtCluster, clusterName, ns string, opts Options) ([]*networkingv1.NetworkPolicy, error) {
	var out []*networkingv1.NetworkPolicy
	vms := PodSelector(clusterName, kc.Namespace)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{infrav1.ClusterNameLabel: clusterName}}
	}
	if Enabled(kc) {
		denied := kc.Spec.Isolation.DeniedCIDRs
		if len(denied) == 0 {
			denied = opts.DeniedCIDRs
		}
		if len(denied) == 0 {
			denied = DefaultDeniedCIDRs
		}
		egress, err := egressRules(kc, vms, denied, opts)
		if err != nil {
			return nil, err
		}
		ingress, err := ingressRules(vms, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: meta(PolicyName(kc)),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: vms},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress:     ingress,
				Egress:      egress,
			},
		})
		controlPlane := maps.Clone(vms)
		controlPlane[infrav1.RoleLabel] = infrav1.RoleControlPlane
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: meta(APIServerName(kc)),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: controlPlane},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  kc.Spec.Isolation.APIServerClients,
					Ports: []networkingv1.NetworkPolicyPort{tcp(targetPort(kc))},
				}},
			},
		})
		if slices.Contains(kc.Spec.TenantCloud.Components, infrav1.TenantCloudControllerManager) {
			out = append(out, loadBalancers(vms, meta(LoadBalancersName(kc))))
		}
	}
	for _, custom := range kc.Spec.CustomNetworkPolicies {
		spec := *custom.Spec.DeepCopy()
		// Narrowed to this cluster's VMs, whatever the selector says, so a
		// custom policy never changes what another tenant may do.
		if spec.PodSelector.MatchLabels == nil {
			spec.PodSelector.MatchLabels = map[string]string{}
		}
		maps.Copy(spec.PodSelector.MatchLabels, vms)
		withAPIDefaults(&spec)
		out = append(out, &networkingv1.NetworkPolicy{ObjectMeta: meta(CustomName(kc, custom.Name)), Spec: spec})
	}
	return out, nil
}

// ParseSSHCheckSources parses the ranges of Options.SSHCheckSources. A
// range with host bits set (10.0.0.1/24) is refused: it would open port 22
// to more than the address it seems to name.
func ParseSSHCheckSources(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, cidr := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
		if err != nil {
			return nil, fmt.Errorf("ssh check source %q: %w", cidr, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("ssh check source %q has host bits set; the range is %s", cidr, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// ingressRules let in the cluster's own VMs, and the ssh bootstrap check
// on port 22: from the provider's namespace, and from the ranges it comes
// from when the provider runs elsewhere.
func ingressRules(vms map[string]string, opts Options) ([]networkingv1.NetworkPolicyIngressRule, error) {
	rules := []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: vms}}},
	}}
	var ssh []networkingv1.NetworkPolicyPeer
	if opts.ProviderNamespace != "" {
		ssh = append(ssh, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: opts.ProviderNamespace}}})
	}
	sources, err := ParseSSHCheckSources(opts.SSHCheckSources)
	if err != nil {
		return nil, err
	}
	for _, p := range sources {
		ssh = append(ssh, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: p.String()}})
	}
	if len(ssh) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{From: ssh, Ports: []networkingv1.NetworkPolicyPort{tcp(22)}})
	}
	return rules, nil
}

// loadBalancers lets anyone reach the worker VMs on the node port range:
// the infra Services the tenant's cloud controller manager makes for its
// LoadBalancer Services select the workers and target their node ports,
// and their clients are anywhere.
func loadBalancers(vms map[string]string, meta metav1.ObjectMeta) *networkingv1.NetworkPolicy {
	workers := maps.Clone(vms)
	workers[infrav1.RoleLabel] = infrav1.RoleWorker
	ports := make([]networkingv1.NetworkPolicyPort, 0, 2)
	for _, p := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
		ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(p),
			Port: ptr.To(intstr.FromInt32(NodePortRangeStart)), EndPort: ptr.To(NodePortRangeEnd)})
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: workers},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: ports}},
	}}
}

func egressRules(kc *infrav1.KubevirtCluster, vms map[string]string, denied []string, opts Options) ([]networkingv1.NetworkPolicyEgressRule, error) {
	families := opts.IPFamilies
	var v4, v6 []string
	for _, cidr := range denied {
		_, n, err := net.ParseCIDR(strings.TrimSpace(cidr))
		if err != nil {
			return nil, fmt.Errorf("denied CIDR %q: %w", cidr, err)
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.String())
		} else {
			v6 = append(v6, n.String())
		}
	}
	resolvers := kc.Spec.Isolation.DNSResolvers
	if len(resolvers) == 0 {
		resolvers = DefaultDNSResolvers()
	}
	resolvers = append([]networkingv1.NetworkPolicyPeer(nil), resolvers...)
	if kc.Spec.DNSConfig != nil {
		for _, ns := range kc.Spec.DNSConfig.Nameservers {
			if block := hostBlock(ns); block != nil {
				resolvers = append(resolvers, networkingv1.NetworkPolicyPeer{IPBlock: block})
			}
		}
	}
	rules := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: vms}}}},
		dnsRule(resolvers),
	}
	if len(kc.Spec.Isolation.DNSResolvers) == 0 {
		rules = append(rules, openShiftDNS())
	}
	var internet []networkingv1.NetworkPolicyPeer
	if len(families) == 0 || slices.Contains(families, corev1.IPv4Protocol) {
		internet = append(internet, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: v4}})
	}
	if len(families) == 0 || slices.Contains(families, corev1.IPv6Protocol) {
		internet = append(internet, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: v6}})
	}
	if len(internet) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: internet})
	}
	// Kubelets reach the API server at the endpoint; when it is an address
	// in a denied range (a private load balancer), it is opened explicitly.
	if ep := kc.Spec.ControlPlaneEndpoint; ep.Port != 0 {
		if block := hostBlock(ep.Host); block != nil {
			rules = append(rules, networkingv1.NetworkPolicyEgressRule{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: block}}, Ports: []networkingv1.NetworkPolicyPort{tcp(ep.Port)},
			})
		}
	}
	// The tenant's cloud components reach the infra API server, most often
	// at an address in a denied range (the in-cluster Service, its
	// endpoints).
	if kc.Spec.TenantCloud.Enabled() {
		for _, hp := range opts.InfraAPI {
			if block := hostBlock(hp.Host); block != nil {
				rules = append(rules, networkingv1.NetworkPolicyEgressRule{
					To: []networkingv1.NetworkPolicyPeer{{IPBlock: block}}, Ports: []networkingv1.NetworkPolicyPort{tcp(hp.Port)},
				})
			}
		}
	}
	return rules, nil
}

// targetPort is the API server port in the control-plane VMs.
func targetPort(kc *infrav1.KubevirtCluster) int32 {
	if p := kc.Spec.ControlPlaneServiceTemplate.Spec.TargetPort; p != 0 {
		return p
	}
	return infrav1.DefaultAPIServerPort
}

// hostBlock is the single-address block of ip, or nil when it is no IP.
func hostBlock(ip string) *networkingv1.IPBlock {
	parsed := net.ParseIP(ip)
	switch {
	case parsed == nil:
		return nil
	case parsed.To4() != nil:
		return &networkingv1.IPBlock{CIDR: parsed.String() + "/32"}
	default:
		return &networkingv1.IPBlock{CIDR: parsed.String() + "/128"}
	}
}

func tcp(port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}
}

func udp(port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(port))}
}

// withAPIDefaults fills in what the API server would default, so that a
// custom policy read back equals the desired one and causes no update.
func withAPIDefaults(spec *networkingv1.NetworkPolicySpec) {
	if len(spec.PolicyTypes) == 0 {
		spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(spec.Egress) > 0 {
			spec.PolicyTypes = append(spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	for i := range spec.Ingress {
		defaultProtocols(spec.Ingress[i].Ports)
	}
	for i := range spec.Egress {
		defaultProtocols(spec.Egress[i].Ports)
	}
}

func defaultProtocols(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

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

package sim

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// guestNetConfig is what a guest's network configuration does with its
// interfaces (docs/simulator.md#guest-network-configuration).
type guestNetConfig struct {
	// static are the addresses it gives interfaces, by lower-case MAC.
	static map[string][]string
	// dhcp are the interfaces it runs DHCP on, by lower-case MAC.
	dhcp map[string]bool
	// all says every interface runs DHCP: an Ignition guest (Flatcar's
	// networkd default unit matches every interface), or a configuration
	// the simulator does not read.
	all bool
	// configured says the guest has network config at all.
	configured bool
}

// dhcpOn says whether the guest runs DHCP on the interface with MAC mac,
// the first of the VM's when first. Without network config cloud-init
// configures only one interface, the first (its fallback config;
// kubevirt/kubevirt#5881 shows a second Multus interface left without an
// address).
func (c guestNetConfig) dhcpOn(mac string, first bool) bool {
	return c.all || c.dhcp[mac] || (!c.configured && first)
}

// guestNetwork reads the guest's network configuration: cloud-init network
// config version 2 (NoCloud's networkData, inline or from its Secret), or
// the systemd-networkd units an Ignition config writes. A guest takes a static address only when its
// configuration matches the interface's MAC.
func (s *Simulator) guestNetwork(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (cfg guestNetConfig, _ error) {
	cfg = guestNetConfig{static: map[string][]string{}, dhcp: map[string]bool{}}
	for _, v := range vmi.Spec.Volumes {
		if cd := v.CloudInitConfigDrive; cd != nil && (cd.NetworkDataSecretRef != nil || cd.NetworkData != "" || cd.NetworkDataBase64 != "") {
			cfg.all, cfg.configured = true, true
			return cfg, nil
		}
		nc := v.CloudInitNoCloud
		if nc == nil {
			continue
		}
		var data []byte
		switch {
		case nc.NetworkDataSecretRef != nil:
			secret := &corev1.Secret{}
			if err := s.client.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: nc.NetworkDataSecretRef.Name}, secret); err != nil {
				return cfg, fmt.Errorf("reading network data Secret %s: %w", nc.NetworkDataSecretRef.Name, err)
			}
			if data = secret.Data["networkdata"]; data == nil {
				data = secret.Data["networkData"]
			}
		case nc.NetworkDataBase64 != "":
			data, _ = base64.StdEncoding.DecodeString(nc.NetworkDataBase64)
		default:
			data = []byte(nc.NetworkData)
		}
		if len(data) == 0 {
			break
		}
		cfg.configured = true
		if !netplanAddresses(data, cfg) {
			cfg.all = true
		}
		return cfg, nil
	}
	data, err := s.userData(ctx, vmi)
	if err != nil || data == nil || data.Format != "ignition" {
		return cfg, err
	}
	cfg.all, cfg.configured = true, true
	walkIgnition(data.Data, 0, func(ign *guestIgnition, _ []byte) {
		for _, f := range ign.Storage.Files {
			if !strings.HasPrefix(f.Path, "/etc/systemd/network/") || !strings.HasSuffix(f.Path, ".network") {
				continue
			}
			if unit, err := decodeDataURL(f.Contents.Source); err == nil {
				networkdAddresses(unit, cfg.static)
			}
		}
	})
	return cfg, nil
}

// netplanAddresses reads network config v2 ethernets matched by MAC: their
// static addresses and whether they run DHCP. It reports false for config
// it does not read (version 1, or not YAML), and counts an entry matched
// otherwise (by name) as DHCP on every interface.
func netplanAddresses(data []byte, cfg guestNetConfig) bool {
	var doc struct {
		Version   int `json:"version"`
		Ethernets map[string]struct {
			Match     map[string]string `json:"match"`
			Addresses []string          `json:"addresses"`
			DHCP4     *bool             `json:"dhcp4"`
			DHCP6     *bool             `json:"dhcp6"`
		} `json:"ethernets"`
	}
	if yaml.Unmarshal(data, &doc) != nil || doc.Version != 2 {
		return false
	}
	for _, e := range doc.Ethernets {
		mac := strings.ToLower(e.Match["macaddress"])
		dhcp := ptr.Deref(e.DHCP4, false) || ptr.Deref(e.DHCP6, false)
		if mac == "" {
			if dhcp {
				return false
			}
			continue
		}
		cfg.dhcp[mac] = cfg.dhcp[mac] || dhcp
		for _, a := range e.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil {
				cfg.static[mac] = append(cfg.static[mac], p.Addr().String())
			}
		}
	}
	return true
}

// networkdAddresses reads a networkd unit's MACAddress= match and its
// Address= lines.
func networkdAddresses(unit []byte, out map[string][]string) {
	var mac string
	var addrs []string
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		switch {
		case !ok:
		case k == "MACAddress":
			mac = strings.ToLower(v)
		case k == "Address":
			if p, err := netip.ParsePrefix(v); err == nil {
				addrs = append(addrs, p.Addr().String())
			}
		}
	}
	if mac != "" {
		out[mac] = append(out[mac], addrs...)
	}
}

// kubeadmNodeIPRE finds kubeadm's kubeletExtraArgs entry node-ip, which
// kubeadm writes to /var/lib/kubelet/kubeadm-flags.env.
var kubeadmNodeIPRE = regexp.MustCompile(`name:\s*"?node-ip"?\s*\n\s*value:\s*"?([0-9a-fA-F.:]+)`)

// kubeadmExternalCloudRE finds kubeadm's kubeletExtraArgs entry
// cloud-provider: external (v1beta4's list form and v1beta3's map form);
// externalCloudFlagRE the flag itself, in a command line or variable.
var (
	kubeadmExternalCloudRE = regexp.MustCompile(`(name:\s*"?cloud-provider"?\s*\n\s*value:|cloud-provider:)\s*"?external("|\s|$)`)
	externalCloudFlagRE    = regexp.MustCompile(`--cloud-provider[= ]"?external("|\s|$)`)
)

// ExternalCloudProvider says whether the guest's kubelet runs with
// --cloud-provider=external, from kubeadm's kubeletExtraArgs or a flag the
// data passes: such a kubelet registers its Node tainted
// node.cloudprovider.kubernetes.io/uninitialized until a cloud controller
// manager initializes it.
func ExternalCloudProvider(data *Bootstrap) bool {
	if data == nil {
		return false
	}
	text := bootstrapText(data)
	return kubeadmExternalCloudRE.MatchString(text) || externalCloudFlagRE.MatchString(text)
}

// nodeIPFlagRE finds a --node-ip flag in a command line or variable.
var nodeIPFlagRE = regexp.MustCompile(`--node-ip[= ]"?([0-9a-fA-F.:]+)`)

// NodeIP is the address the guest's kubelet reports, as the kubelet
// chooses it (kubernetes pkg/kubelet/nodestatus/setters.go, NodeAddress):
// its --node-ip, else the guest's address on the default route's
// interface (the node name resolves to a loopback address in the guests'
// /etc/hosts, which the kubelet skips). It fails when the kubelet would not
// start: the provider's node IP script found no address.
func NodeIP(data *Bootstrap, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	ip, err := NodeIPFlag(data, vmi)
	if err != nil || ip != "" {
		return ip, err
	}
	return defaultRouteAddress(vmi), nil
}

// NodeIPFlag is the address the guest's kubelet is told to report with
// --node-ip, or "" when nothing tells it, resolved as systemd would start
// kubeadm's kubelet unit: the last ExecStart of the kubelet.service.d
// drop-ins the data writes expands its variables, where an EnvironmentFile
// (/etc/default/kubelet, /etc/sysconfig/kubelet, or one a drop-in names)
// wins over an Environment= line; without such a drop-in, kubeadm's
// ExecStart passes KUBELET_KUBEADM_ARGS (kubeletExtraArgs) then
// KUBELET_EXTRA_ARGS. An ExecStartPre running the provider's node IP
// script writes its environment file first (see runNodeIPScript).
func NodeIPFlag(data *Bootstrap, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	if data == nil {
		return "", nil
	}
	files := writtenFiles(data)
	envFiles := []string{"/etc/sysconfig/kubelet", "/etc/default/kubelet"}
	var dropIns []string
	for path := range files {
		if strings.HasPrefix(path, "/etc/systemd/system/kubelet.service.d/") && strings.HasSuffix(path, ".conf") {
			dropIns = append(dropIns, path)
		}
	}
	slices.Sort(dropIns)
	env := map[string]string{}
	execStart := ""
	for _, path := range dropIns {
		for _, line := range strings.Split(files[path], "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
			switch k {
			case "Environment":
				for name, value := range envAssignments(strings.Trim(v, `"`)) {
					env[name] = value
				}
			case "EnvironmentFile":
				envFiles = append(envFiles, strings.TrimPrefix(v, "-"))
			case "ExecStartPre":
				if err := runNodeIPScript(strings.Fields(v), files, vmi); err != nil {
					return "", err
				}
			case "ExecStart":
				execStart = v
			}
		}
	}
	for _, path := range envFiles {
		for k, v := range envAssignments(files[path]) {
			env[k] = v
		}
	}
	if execStart == "" {
		// kubeadm's own unit: its flags, then the user's extra ones.
		ip := ""
		if m := kubeadmNodeIPRE.FindStringSubmatch(bootstrapText(data)); m != nil {
			ip = m[1]
		}
		if m := nodeIPFlagRE.FindStringSubmatch(env["KUBELET_EXTRA_ARGS"]); m != nil {
			ip = m[1]
		}
		return validIP(ip), nil
	}
	expanded := os.Expand(execStart, func(name string) string { return env[name] })
	ip := ""
	for _, m := range nodeIPFlagRE.FindAllStringSubmatch(expanded, -1) {
		ip = m[1] // the last flag wins
	}
	return validIP(ip), nil
}

// nodeIPScriptMark is in the provider's node IP script (pkg/machine/ipam/guestnetwork.go,
// which runs the script itself against a fake sysfs in its tests).
const nodeIPScriptMark = "finds the kubelet's --node-ip"

// runNodeIPScript does what the provider's node IP script does, when the
// ExecStartPre command args runs it (/bin/sh <script> <mac> <env file>):
// it writes the guest's address on the interface with that MAC, IPv4
// first, to the environment file, and fails when there is none. Other
// commands change nothing the simulator follows.
func runNodeIPScript(args []string, files map[string]string, vmi *kubevirtv1.VirtualMachineInstance) error {
	if len(args) > 0 && (args[0] == "/bin/sh" || args[0] == "/bin/bash") {
		args = args[1:]
	}
	if len(args) != 3 || !strings.Contains(files[args[0]], nodeIPScriptMark) {
		return nil
	}
	mac, out := sysfsMAC(args[1]), args[2]
	for _, iface := range vmi.Status.Interfaces {
		if sysfsMAC(iface.MAC) != mac || mac == "" {
			continue
		}
		if ip := preferIPv4(guestAddresses(vmi, iface)); ip != "" {
			files[out] = "CAPKV_KUBELET_NODE_IP=--node-ip=" + ip + "\n"
			return nil
		}
	}
	return fmt.Errorf("the kubelet does not start: its node IP script finds no address on the interface with MAC %s", mac)
}

// sysfsMAC is a MAC address as /sys/class/net shows it (colons, lower
// case), or "" for none.
func sysfsMAC(s string) string {
	if hw, err := net.ParseMAC(s); err == nil {
		return hw.String()
	}
	return ""
}

// defaultRouteAddress is the guest's address on the interface of its
// default route: the pod network's when the VM has one (DHCP on it gives
// the route), else the first interface's.
func defaultRouteAddress(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, iface := range vmi.Status.Interfaces {
		if iface.Name == podNetworkName(vmi) {
			return preferIPv4(guestAddresses(vmi, iface))
		}
	}
	if len(vmi.Status.Interfaces) > 0 {
		return preferIPv4(guestAddresses(vmi, vmi.Status.Interfaces[0]))
	}
	return ""
}

func podNetworkName(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			return n.Name
		}
	}
	return ""
}

// guestAddresses are the addresses the guest itself holds on an interface:
// those the VMI reports, except behind masquerade binding, where the guest
// has the second address of the VM network CIDR (10.0.2.2 by default)
// while the VMI reports the pod's (kubevirt pkg/network/link/address.go,
// GenerateMasqueradeGatewayAndVmIPAddrs).
func guestAddresses(vmi *kubevirtv1.VirtualMachineInstance, iface kubevirtv1.VirtualMachineInstanceNetworkInterface) []string {
	for _, n := range vmi.Spec.Networks {
		if n.Name != iface.Name || n.Pod == nil {
			continue
		}
		for _, i := range vmi.Spec.Domain.Devices.Interfaces {
			if i.Name == n.Name && i.Masquerade != nil {
				cidr := cmp.Or(n.Pod.VMNetworkCIDR, "10.0.2.0/24")
				if p, err := netip.ParsePrefix(cidr); err == nil {
					return []string{p.Masked().Addr().Next().Next().String()}
				}
			}
		}
	}
	if len(iface.IPs) > 0 {
		return iface.IPs
	}
	return []string{iface.IP}
}

// preferIPv4 is the first IPv4 address of ips, else the first address.
func preferIPv4(ips []string) string {
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			return ip
		}
	}
	for _, ip := range ips {
		if ip != "" {
			return ip
		}
	}
	return ""
}

func validIP(s string) string {
	if _, err := netip.ParseAddr(s); err != nil {
		return ""
	}
	return s
}

// envAssignments reads NAME=value pairs, as an environment file or an
// Environment= setting holds them.
func envAssignments(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && !strings.HasPrefix(k, "#") {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// writtenFiles is what the bootstrap data writes before any command runs,
// by path: cloud-config write_files (in any part) or an Ignition config's
// files (merged or appended configs after their parent, so they win).
func writtenFiles(data *Bootstrap) map[string]string {
	files := map[string]string{}
	if data.Format == "ignition" {
		walkIgnition(data.Data, 0, func(cfg *guestIgnition, _ []byte) {
			for _, f := range cfg.Storage.Files {
				if b, err := decodeDataURL(f.Contents.Source); err == nil {
					files[f.Path] = string(b)
				}
			}
		})
		return files
	}
	walkCloudInit(data.Data, "", nil, 0, func(doc []byte, _ string) {
		var cfg struct {
			WriteFiles []struct {
				Path     string `json:"path"`
				Encoding string `json:"encoding"`
				Content  string `json:"content"`
			} `json:"write_files"`
		}
		if yaml.Unmarshal(doc, &cfg) != nil {
			return
		}
		for _, f := range cfg.WriteFiles {
			content := []byte(f.Content)
			if f.Encoding == "b64" || f.Encoding == "base64" {
				if b, err := base64.StdEncoding.DecodeString(f.Content); err == nil {
					content = b
				}
			}
			files[f.Path] = string(content)
		}
	})
	return files
}

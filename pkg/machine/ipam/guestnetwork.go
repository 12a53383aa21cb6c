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

// Package ipam takes static addresses for a machine's networks from Cluster
// API IPAM pools, and writes the guest network configuration that applies
// them: cloud-init network config version 2, or systemd-networkd units for
// Ignition guests (docs/ipam.md).
package ipam

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
)

// Assigned are the addresses a machine holds on one VM network.
type Assigned struct {
	// Network is the VM network.
	Network string
	// Addresses with their prefix lengths, in the order of the pools.
	Addresses []netip.Prefix
	// Gateway is the default route the user asked for on this network,
	// or empty.
	Gateway string
	// PoolGateway is the first pool address's gateway. It becomes the
	// default route only on a VM without a pod network, whose DHCP would
	// otherwise give it one (see Interfaces).
	PoolGateway string
	// Nameservers the guest resolves with on this network.
	Nameservers []string
}

// MAC is the MAC address the provider gives the interface of a VM network
// when the guest's network configuration must name it: a locally
// administered unicast address derived from the VM and the network, so a
// recreated VM keeps it. KubeVirt's own (or kubemacpool's) choice would be
// known only after the VM is created.
func MAC(vmNamespace, vmName, network string) string {
	sum := sha256.Sum256([]byte(vmNamespace + "/" + vmName + "/" + network))
	// 0x02: locally administered, unicast.
	return net.HardwareAddr{0x02, sum[0], sum[1], sum[2], sum[3], sum[4]}.String()
}

// Interface is one guest interface as the network configuration sees it.
type Interface struct {
	// Name is the VM network's name, used as the configuration's key.
	Name string
	// MAC identifies the interface in the guest.
	MAC string
	// Static is nil for an interface configured by DHCP.
	Static *Assigned
}

// Interfaces pairs the VM's interfaces with the assigned addresses. The
// default route goes through a static interface only when asked for, or
// from its pool's gateway when the VM has no pod network. It fails when an assignment names a network the VM lacks, its pod network,
// or an interface without a MAC address.
func Interfaces(spec *kubevirtv1.VirtualMachineInstanceSpec, assigned []Assigned) ([]Interface, error) {
	networks := map[string]kubevirtv1.Network{}
	for _, n := range spec.Networks {
		networks[n.Name] = n
	}
	for _, a := range assigned {
		n, ok := networks[a.Network]
		switch {
		case !ok:
			return nil, fmt.Errorf("networkAddresses names network %q, which the VM does not have (its networks: %s)",
				a.Network, strings.Join(networkNames(spec), ", "))
		case n.Pod != nil:
			return nil, fmt.Errorf("networkAddresses names network %q, the VM's pod network, whose address KubeVirt hands out", a.Network)
		}
	}
	hasPod := slices.ContainsFunc(spec.Networks, func(n kubevirtv1.Network) bool { return n.Pod != nil })
	var out []Interface
	for _, iface := range spec.Domain.Devices.Interfaces {
		if _, ok := networks[iface.Name]; !ok {
			continue
		}
		if iface.MacAddress == "" {
			return nil, fmt.Errorf("interface %q has no MAC address for the network configuration to match", iface.Name)
		}
		i := Interface{Name: iface.Name, MAC: strings.ToLower(iface.MacAddress)}
		if k := slices.IndexFunc(assigned, func(a Assigned) bool { return a.Network == iface.Name }); k >= 0 {
			static := assigned[k]
			// Replies to what reaches the VM over its pod network leave
			// by the default route: a VLAN gateway taken over silently
			// would break the control-plane Service and the checks.
			if static.Gateway == "" && !hasPod {
				static.Gateway = static.PoolGateway
			}
			i.Static = &static
		}
		out = append(out, i)
	}
	return out, nil
}

func networkNames(spec *kubevirtv1.VirtualMachineInstanceSpec) []string {
	var names []string
	for _, n := range spec.Networks {
		names = append(names, n.Name)
	}
	return names
}

// netplanEthernet is one entry of cloud-init's network config version 2,
// which is netplan's format.
type netplanEthernet struct {
	Match       map[string]string  `json:"match"`
	DHCP4       *bool              `json:"dhcp4,omitempty"`
	DHCP6       *bool              `json:"dhcp6,omitempty"`
	Optional    *bool              `json:"optional,omitempty"`
	Addresses   []string           `json:"addresses,omitempty"`
	Routes      []netplanRoute     `json:"routes,omitempty"`
	Nameservers *netplanNameserver `json:"nameservers,omitempty"`
}

type netplanRoute struct {
	To  string `json:"to"`
	Via string `json:"via"`
}

type netplanNameserver struct {
	Addresses []string `json:"addresses"`
}

// CloudInitNetworkConfig renders network config version 2 for every
// interface: static ones get their addresses, the others DHCP as they
// would have without network config (cloud-init then configures nothing
// else). Interfaces are matched by MAC; their names in the guest are the
// OS's own.
func CloudInitNetworkConfig(ifaces []Interface) ([]byte, error) {
	ethernets := map[string]netplanEthernet{}
	yes, no := true, false
	for _, i := range ifaces {
		e := netplanEthernet{Match: map[string]string{"macaddress": i.MAC}}
		if i.Static == nil {
			// A network without DHCP must not hold up the boot.
			e.DHCP4, e.Optional = &yes, &yes
			ethernets[i.Name] = e
			continue
		}
		e.DHCP4, e.DHCP6 = &no, &no
		for _, p := range i.Static.Addresses {
			e.Addresses = append(e.Addresses, p.String())
		}
		if gw := i.Static.Gateway; gw != "" {
			to := "0.0.0.0/0"
			if strings.Contains(gw, ":") {
				to = "::/0"
			}
			e.Routes = []netplanRoute{{To: to, Via: gw}}
		}
		if len(i.Static.Nameservers) > 0 {
			e.Nameservers = &netplanNameserver{Addresses: i.Static.Nameservers}
		}
		ethernets[i.Name] = e
	}
	return yaml.Marshal(map[string]any{"version": 2, "ethernets": ethernets})
}

// NetworkdUnit is the systemd-networkd unit that gives an Ignition guest's
// interface its static addresses, matched by MAC. Its name sorts before the
// OS's catch-all DHCP unit, and networkd applies the first unit that matches.
func NetworkdUnit(i Interface) (path string, contents []byte) {
	var b strings.Builder
	fmt.Fprintf(&b, "[Match]\nMACAddress=%s\n\n[Network]\nDHCP=no\n", i.MAC)
	for _, p := range i.Static.Addresses {
		fmt.Fprintf(&b, "Address=%s\n", p)
	}
	if i.Static.Gateway != "" {
		fmt.Fprintf(&b, "Gateway=%s\n", i.Static.Gateway)
	}
	for _, ns := range i.Static.Nameservers {
		fmt.Fprintf(&b, "DNS=%s\n", ns)
	}
	return "/etc/systemd/network/10-capkv-" + i.Name + ".network", []byte(b.String())
}

// GuestNetwork is how a guest applies its assigned addresses on the VM's
// interfaces: the files to add to its user data (the kubelet's node IP on
// nodeNetwork; systemd-networkd units for Ignition guests) and, for
// cloud-init guests, the network config that replaces any the user gave.
// A node-address network on Multus without an assigned address gets the
// script that finds its DHCP address instead (DHCPNodeIP) and, for a
// cloud-init guest whose user gave no network config, network config with
// DHCP on every interface (DHCPNetworkConfig). macOf gives interfaces
// without a MAC one; nil for a VM that exists already, whose interfaces
// keep what they have. It fails for addresses on a network the VM lacks,
// or on its pod network.
func GuestNetwork(spec *kubevirtv1.VirtualMachineInstanceSpec, assigned []Assigned, nodeNetwork string, macOf func(string) string, ignition, userNetworkData bool) ([]userdata.File, []byte, error) {
	if len(assigned) == 0 {
		files := DHCPNodeIP(spec, nodeNetwork, macOf)
		if files == nil || ignition || userNetworkData {
			return files, nil, nil
		}
		networkData, err := DHCPNetworkConfig(spec, macOf)
		return files, networkData, err
	}
	ifaces, err := Interfaces(spec, assigned)
	if err != nil {
		return nil, nil, err
	}
	var files []userdata.File
	if ip, ok := NodeIP(assigned, nodeNetwork); ok {
		files = append(files, userdata.File{Path: KubeletNodeIPPath, Mode: 0o644, Contents: KubeletNodeIPDropIn(ip)})
	} else {
		files = append(files, DHCPNodeIP(spec, nodeNetwork, macOf)...)
	}
	if !ignition {
		networkData, err := CloudInitNetworkConfig(ifaces)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering network config: %w", err)
		}
		return files, networkData, nil
	}
	for _, i := range ifaces {
		if i.Static != nil {
			path, contents := NetworkdUnit(i)
			files = append(files, userdata.File{Path: path, Mode: 0o644, Contents: contents})
		}
	}
	return files, nil, nil
}

// KubeletNodeIPPath is the systemd drop-in that tells the kubelet the node
// address. It sorts after kubeadm's 10-kubeadm.conf and replaces its
// ExecStart with the same command plus the flag from a variable of its own:
// KUBELET_EXTRA_ARGS could not carry it, as images write that variable in
// an EnvironmentFile (/etc/default/kubelet, /etc/sysconfig/kubelet), which
// systemd lets win over an Environment line.
const KubeletNodeIPPath = "/etc/systemd/system/kubelet.service.d/20-capkv-node-ip.conf"

// kubeletExecStart is kubeadm's kubelet command line with the node address
// flag last, so that it wins over a --node-ip in kubeadm's kubeletExtraArgs.
const kubeletExecStart = "ExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS " +
	"$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS $CAPKV_KUBELET_NODE_IP\n"

// KubeletNodeIPDropIn is the drop-in's contents for the static address ip.
func KubeletNodeIPDropIn(ip netip.Addr) []byte {
	return []byte(fmt.Sprintf("[Service]\nEnvironment=\"CAPKV_KUBELET_NODE_IP=--node-ip=%s\"\n", ip) + kubeletExecStart)
}

// NodeIPScriptPath is the script that finds the address a network
// configured by DHCP gave the guest, for the kubelet's --node-ip.
const NodeIPScriptPath = "/etc/capkv/kubelet-node-ip.sh"

// NodeIPEnvPath is the environment file the script writes the flag to, in
// /run so that every boot looks again.
const NodeIPEnvPath = "/run/capkv/kubelet-node-ip.env"

// nodeIPScript writes CAPKV_KUBELET_NODE_IP=--node-ip=<address> to the file
// $2: the first global IPv4 address of the interface whose MAC is $1, or,
// when none has come after a minute, its first global IPv6 address. It
// fails when the interface has neither, so that the kubelet never starts
// with another interface's address; the kubelet unit's Restart=always
// runs it again. A minute keeps it within systemd's default start timeout
// (90 s), which covers ExecStartPre. CAPKV_SYSFS and CAPKV_NODE_IP_WAIT (in
// seconds) let the tests point it at a directory of their own and not wait.
const nodeIPScript = `#!/bin/sh
# Written by the CAPKV provider: finds the kubelet's --node-ip on the
# interface with the MAC address the provider gave the node-address network.
set -u
mac=$(printf '%s' "$1" | tr 'A-F' 'a-f')
out=$2
sysfs=${CAPKV_SYSFS:-/sys/class/net}
address() {
  for dev in "$sysfs"/*; do
    [ "$(cat "$dev/address" 2>/dev/null)" = "$mac" ] || continue
    # A VLAN or bond on top shares the MAC: the first with an address wins.
    found=$(ip "$1" -o addr show dev "${dev##*/}" scope global | awk '{ split($4, a, "/"); print a[1]; exit }')
    if [ -n "$found" ]; then
      echo "$found"
      return
    fi
  done
}
wait=${CAPKV_NODE_IP_WAIT:-60}
tries=1
while :; do
  found=$(address -4)
  if [ -z "$found" ] && [ "$tries" -ge "$wait" ]; then
    found=$(address -6)
  fi
  if [ -n "$found" ]; then
    mkdir -p "$(dirname "$out")"
    printf 'CAPKV_KUBELET_NODE_IP=--node-ip=%s\n' "$found" > "$out"
    exit 0
  fi
  [ "$tries" -lt "$wait" ] || break
  tries=$((tries + 1))
  sleep 1
done
echo "kubelet-node-ip: no address on the interface with MAC $mac yet" >&2
exit 1
`

// KubeletNodeIPByMACDropIn is the drop-in for a node address the guest
// learns by DHCP on the interface with the MAC mac: the script runs before
// the kubelet and leaves the flag in an environment file, which systemd
// reads after ExecStartPre has finished (systemd.exec(5), EnvironmentFile:
// "you can generate these files in one unit state, and read it with this
// option in the next"). kubeadm reloads systemd before it restarts the
// kubelet, so a drop-in written at boot applies.
func KubeletNodeIPByMACDropIn(mac string) []byte {
	return []byte(fmt.Sprintf("[Service]\nExecStartPre=/bin/sh %s %s %s\nEnvironmentFile=-%s\n",
		NodeIPScriptPath, strings.ToLower(mac), NodeIPEnvPath, NodeIPEnvPath) + kubeletExecStart)
}

// DHCPNodeIP readies the guest of a VM whose node-address network is a
// Multus network without a static address: the kubelet, left alone, would
// report the address of the default route's interface, which on a VM that
// also has the pod network with masquerade binding is 10.0.2.2 on every VM.
// It gives that network's interface the MAC macOf(network) when it has
// none, and returns the script and the drop-in that find its address. A
// pod network, a network the VM lacks, or an interface without a MAC when
// macOf is nil (a VM that exists already) needs or gets nothing: nil.
func DHCPNodeIP(spec *kubevirtv1.VirtualMachineInstanceSpec, nodeNetwork string, macOf func(network string) string) []userdata.File {
	if nodeNetwork == "" || !slices.ContainsFunc(spec.Networks, func(n kubevirtv1.Network) bool { return n.Name == nodeNetwork && n.Multus != nil }) {
		return nil
	}
	for k := range spec.Domain.Devices.Interfaces {
		iface := &spec.Domain.Devices.Interfaces[k]
		if iface.Name != nodeNetwork {
			continue
		}
		if iface.MacAddress == "" && macOf != nil {
			iface.MacAddress = macOf(iface.Name)
		}
		// KubeVirt takes any form Go's net.ParseMAC does; sysfs shows
		// colons and lower case.
		mac, err := net.ParseMAC(iface.MacAddress)
		if err != nil {
			return nil
		}
		return []userdata.File{
			{Path: NodeIPScriptPath, Mode: 0o755, Contents: []byte(nodeIPScript)},
			{Path: KubeletNodeIPPath, Mode: 0o644, Contents: KubeletNodeIPByMACDropIn(mac.String())},
		}
	}
	return nil
}

// DHCPNetworkConfig is cloud-init network config that runs DHCP on every
// interface of the VM, matched by MAC; interfaces without one get
// macOf(network). Without network config, cloud-init configures only one
// interface, the first (its fallback config), so a Multus network's
// interface behind the pod network would get no address
// (kubevirt/kubevirt#5881). Nil when an interface has no MAC and macOf is
// nil.
func DHCPNetworkConfig(spec *kubevirtv1.VirtualMachineInstanceSpec, macOf func(network string) string) ([]byte, error) {
	for k := range spec.Domain.Devices.Interfaces {
		iface := &spec.Domain.Devices.Interfaces[k]
		if iface.MacAddress == "" {
			if macOf == nil {
				return nil, nil
			}
			iface.MacAddress = macOf(iface.Name)
		}
	}
	ifaces, err := Interfaces(spec, nil)
	if err != nil {
		return nil, err
	}
	return CloudInitNetworkConfig(ifaces)
}

// NodeIP is the address the kubelet should report: the first IPv4 address
// of the node-address network, else its first address.
func NodeIP(assigned []Assigned, nodeNetwork string) (netip.Addr, bool) {
	for _, a := range assigned {
		if a.Network != nodeNetwork || len(a.Addresses) == 0 {
			continue
		}
		for _, p := range a.Addresses {
			if p.Addr().Is4() {
				return p.Addr(), true
			}
		}
		return a.Addresses[0].Addr(), true
	}
	return netip.Addr{}, false
}

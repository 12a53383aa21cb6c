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

package ipam

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
)

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

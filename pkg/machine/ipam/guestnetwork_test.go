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
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func vmiSpec() *kubevirtv1.VirtualMachineInstanceSpec {
	return &kubevirtv1.VirtualMachineInstanceSpec{
		Networks: []kubevirtv1.Network{
			{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
			{Name: "tenant", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "ns/tenant"}}},
		},
		Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Interfaces: []kubevirtv1.Interface{
			{Name: "default", MacAddress: "02:00:00:00:00:01"},
			{Name: "tenant", MacAddress: "02:AA:00:00:00:02"},
		}}},
	}
}

func TestMACIsStableLocalAndUnicast(t *testing.T) {
	a, b := MAC("ns", "vm", "tenant"), MAC("ns", "vm", "tenant")
	if a != b {
		t.Fatalf("MAC changed between calls: %s, %s", a, b)
	}
	if !strings.HasPrefix(a, "02:") || len(a) != 17 {
		t.Fatalf("MAC %s is not a locally administered unicast address", a)
	}
	if MAC("ns", "vm", "other") == a || MAC("ns", "vm2", "tenant") == a {
		t.Fatal("MACs of different interfaces collide")
	}
}

func TestInterfaces(t *testing.T) {
	static := []Assigned{{Network: "tenant", Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.10.5/24")}}}
	ifaces, err := Interfaces(vmiSpec(), static)
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 2 || ifaces[0].Static != nil || ifaces[1].Static == nil || ifaces[1].MAC != "02:aa:00:00:00:02" {
		t.Fatalf("unexpected interfaces %+v", ifaces)
	}
	for _, tc := range []struct{ network, want string }{
		{"missing", `names network "missing", which the VM does not have (its networks: default, tenant)`},
		{"default", "the VM's pod network"},
	} {
		_, err := Interfaces(vmiSpec(), []Assigned{{Network: tc.network}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("network %s: got %v, want an error containing %q", tc.network, err, tc.want)
		}
	}
	noMAC := vmiSpec()
	noMAC.Domain.Devices.Interfaces[1].MacAddress = ""
	if _, err := Interfaces(noMAC, static); err == nil {
		t.Error("an interface without MAC was accepted")
	}
}

func TestCloudInitNetworkConfig(t *testing.T) {
	ifaces := []Interface{
		{Name: "default", MAC: "02:00:00:00:00:01"},
		{Name: "tenant", MAC: "02:aa:00:00:00:02", Static: &Assigned{Network: "tenant",
			Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.10.5/24")}, Gateway: "192.168.10.1", Nameservers: []string{"192.168.10.53"}}},
	}
	out, err := CloudInitNetworkConfig(ifaces)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version   int                        `json:"version"`
		Ethernets map[string]netplanEthernet `json:"ethernets"`
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	def, tenant := got.Ethernets["default"], got.Ethernets["tenant"]
	switch {
	case got.Version != 2:
		t.Errorf("version %d", got.Version)
	case def.DHCP4 == nil || !*def.DHCP4 || def.Match["macaddress"] != "02:00:00:00:00:01":
		t.Errorf("the pod network interface lost DHCP: %+v", def)
	case tenant.DHCP4 == nil || *tenant.DHCP4 || len(tenant.Addresses) != 1 || tenant.Addresses[0] != "192.168.10.5/24":
		t.Errorf("static interface %+v", tenant)
	case len(tenant.Routes) != 1 || tenant.Routes[0].Via != "192.168.10.1" || tenant.Routes[0].To != "0.0.0.0/0":
		t.Errorf("routes %+v", tenant.Routes)
	case tenant.Nameservers == nil || tenant.Nameservers.Addresses[0] != "192.168.10.53":
		t.Errorf("nameservers %+v", tenant.Nameservers)
	}
}

func TestNetworkdUnitAndNodeIP(t *testing.T) {
	a := Assigned{Network: "tenant", Addresses: []netip.Prefix{netip.MustParsePrefix("fd00::5/64"), netip.MustParsePrefix("192.168.10.5/24")}}
	path, unit := NetworkdUnit(Interface{Name: "tenant", MAC: "02:aa:00:00:00:02", Static: &a})
	if path != "/etc/systemd/network/10-capkv-tenant.network" {
		t.Errorf("path %s", path)
	}
	for _, want := range []string{"MACAddress=02:aa:00:00:00:02", "Address=fd00::5/64", "Address=192.168.10.5/24", "DHCP=no"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(string(unit), "Gateway=") {
		t.Error("a unit without gateway sets one")
	}
	ip, ok := NodeIP([]Assigned{a}, "tenant")
	if !ok || ip.String() != "192.168.10.5" {
		t.Errorf("node IP %v %v, want the IPv4 address", ip, ok)
	}
	if _, ok := NodeIP([]Assigned{a}, "other"); ok {
		t.Error("a node IP from another network")
	}
	if got := string(KubeletNodeIPDropIn(ip)); !strings.Contains(got, "--node-ip=192.168.10.5") {
		t.Errorf("drop-in %q", got)
	}
}

func TestClaimNameIsBounded(t *testing.T) {
	if got := ClaimName("m", "tenant", 1); got != "m.tenant-1" {
		t.Errorf("ClaimName = %s", got)
	}
	long := ClaimName(strings.Repeat("a", 250), "tenant", 0)
	if len(long) > 253 || long == ClaimName(strings.Repeat("a", 251), "tenant", 0) {
		t.Errorf("long claim names are not bounded and distinct: %d", len(long))
	}
}

func TestDHCPNodeIP(t *testing.T) {
	provider := func(string) string { return "02:cc:00:00:00:09" }
	for _, tc := range []struct {
		name, network, specMAC string
		macOf                  func(string) string
		wantMAC                string // "" for no files
	}{
		{name: "a Multus network gets the provider's MAC", network: "tenant", macOf: provider, wantMAC: "02:cc:00:00:00:09"},
		{name: "a MAC in the template is kept, in sysfs's form", network: "tenant", specMAC: "02-AA-00-00-00-02", macOf: provider, wantMAC: "02:aa:00:00:00:02"},
		{name: "an existing VM's MAC is used", network: "tenant", specMAC: "02:aa:00:00:00:02", wantMAC: "02:aa:00:00:00:02"},
		{name: "an existing VM without a MAC gets nothing", network: "tenant"},
		{name: "the pod network's address is the default route's", network: "default", macOf: provider},
		{name: "a network the VM lacks", network: "storage", macOf: provider},
		{name: "no node-address network", network: "", macOf: provider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := vmiSpec()
			spec.Domain.Devices.Interfaces[1].MacAddress = tc.specMAC
			files := DHCPNodeIP(spec, tc.network, tc.macOf)
			if tc.wantMAC == "" {
				if len(files) != 0 || spec.Domain.Devices.Interfaces[1].MacAddress != tc.specMAC {
					t.Fatalf("files %v, tenant MAC %q: want none and the MAC untouched", files, spec.Domain.Devices.Interfaces[1].MacAddress)
				}
				return
			}
			if len(files) != 2 || files[0].Path != NodeIPScriptPath || files[1].Path != KubeletNodeIPPath {
				t.Fatalf("files %v", files)
			}
			dropIn := string(files[1].Contents)
			for _, want := range []string{
				"ExecStartPre=/bin/sh " + NodeIPScriptPath + " " + tc.wantMAC + " " + NodeIPEnvPath + "\n",
				"EnvironmentFile=-" + NodeIPEnvPath + "\n",
				"$CAPKV_KUBELET_NODE_IP\n",
			} {
				if !strings.Contains(dropIn, want) {
					t.Errorf("drop-in lacks %q:\n%s", want, dropIn)
				}
			}
		})
	}
}

// TestGuestNetworkWithDHCPNodeAddress: without pool addresses, a
// cloud-init guest gets DHCP on every interface, as cloud-init's own
// fallback configures only the first; the user's network config and an
// Ignition guest's OS are left to do it.
func TestGuestNetworkWithDHCPNodeAddress(t *testing.T) {
	macOf := func(network string) string { return MAC("ns", "vm", network) }
	for _, tc := range []struct {
		name                      string
		ignition, userNetworkData bool
		wantConfig                bool
	}{
		{name: "cloud-init", wantConfig: true},
		{name: "cloud-init with the user's network config", userNetworkData: true},
		{name: "ignition", ignition: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := vmiSpec()
			spec.Domain.Devices.Interfaces[0].MacAddress, spec.Domain.Devices.Interfaces[1].MacAddress = "", ""
			files, networkData, err := GuestNetwork(spec, nil, "tenant", macOf, tc.ignition, tc.userNetworkData)
			if err != nil || len(files) != 2 {
				t.Fatalf("files %v, err %v", files, err)
			}
			if !tc.wantConfig {
				if networkData != nil {
					t.Fatalf("network config %s", networkData)
				}
				return
			}
			var cfg struct {
				Ethernets map[string]netplanEthernet `json:"ethernets"`
			}
			if err := yaml.Unmarshal(networkData, &cfg); err != nil {
				t.Fatal(err)
			}
			for _, network := range []string{"default", "tenant"} {
				e := cfg.Ethernets[network]
				if e.DHCP4 == nil || !*e.DHCP4 || e.Match["macaddress"] != MAC("ns", "vm", network) {
					t.Errorf("%s: %+v, want DHCP matched by the provider's MAC", network, e)
				}
			}
		})
	}
}

// TestNodeIPScript runs the script the guest runs, against a sysfs
// directory and an ip command of the test's: the address it writes is the
// one on the interface with the MAC, IPv4 first.
func TestNodeIPScript(t *testing.T) {
	for _, tc := range []struct {
		name, mac string
		// addrs are the fake ip command's output by device and family.
		addrs map[string]string
		want  string // "" when the script must fail
	}{
		{name: "the IPv4 address of the matching interface", mac: "02:AA:00:00:00:02",
			addrs: map[string]string{"eth0 -4": "10.0.2.2/24", "eth1 -4": "192.168.0.7/16", "eth1 -6": "fd00::7/64"},
			want:  "CAPKV_KUBELET_NODE_IP=--node-ip=192.168.0.7\n"},
		{name: "IPv6 when no IPv4 address comes", mac: "02:aa:00:00:00:02",
			addrs: map[string]string{"eth0 -4": "10.0.2.2/24", "eth1 -6": "fd00::7/64"},
			want:  "CAPKV_KUBELET_NODE_IP=--node-ip=fd00::7\n"},
		{name: "a VLAN on the interface, sharing its MAC", mac: "02:aa:00:00:00:02",
			addrs: map[string]string{"eth0 -4": "10.0.2.2/24", "eth1.100 -4": "192.168.9.7/24"},
			want:  "CAPKV_KUBELET_NODE_IP=--node-ip=192.168.9.7\n"},
		{name: "nothing on the interface yet", mac: "02:aa:00:00:00:02",
			addrs: map[string]string{"eth0 -4": "10.0.2.2/24"}},
		{name: "no interface with the MAC", mac: "02:bb:00:00:00:02",
			addrs: map[string]string{"eth0 -4": "10.0.2.2/24", "eth1 -4": "192.168.0.7/16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sysfs, bin := filepath.Join(dir, "net"), filepath.Join(dir, "bin")
			for dev, mac := range map[string]string{"eth0": "02:00:00:00:00:01", "eth1": "02:aa:00:00:00:02", "eth1.100": "02:aa:00:00:00:02"} {
				mustWrite(t, filepath.Join(sysfs, dev, "address"), mac+"\n", 0o644)
			}
			// ip <family> -o addr show dev <dev> scope global, in iproute2's
			// one-line format.
			var fake strings.Builder
			fake.WriteString("#!/bin/sh\ncase \"$1 $6\" in\n")
			for k, addr := range tc.addrs {
				family, dev := strings.Fields(k)[1], strings.Fields(k)[0]
				inet := map[string]string{"-4": "inet", "-6": "inet6"}[family]
				fake.WriteString("\"" + family + " " + dev + "\") echo '3: " + dev + "    " + inet + " " + addr + " scope global " + dev + "\\       valid_lft forever';;\n")
			}
			fake.WriteString("esac\n")
			mustWrite(t, filepath.Join(bin, "ip"), fake.String(), 0o755)
			script := filepath.Join(dir, "kubelet-node-ip.sh")
			mustWrite(t, script, nodeIPScript, 0o755)
			out := filepath.Join(dir, "run", "capkv", "kubelet-node-ip.env")

			cmd := exec.Command("sh", script, tc.mac, out)
			cmd.Env = append(os.Environ(), "CAPKV_SYSFS="+sysfs, "CAPKV_NODE_IP_WAIT=1", "PATH="+bin+":"+os.Getenv("PATH"))
			output, err := cmd.CombinedOutput()
			written, _ := os.ReadFile(out)
			if tc.want == "" {
				if err == nil || len(written) != 0 {
					t.Fatalf("the script succeeded (%s), wrote %q", output, written)
				}
				if !strings.Contains(string(output), "no address on the interface with MAC "+strings.ToLower(tc.mac)) {
					t.Errorf("output %q does not say what it waited for", output)
				}
				return
			}
			if err != nil || string(written) != tc.want {
				t.Fatalf("err %v (%s), wrote %q, want %q", err, output, written, tc.want)
			}
		})
	}
}

func mustWrite(t *testing.T, path, contents string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(contents), mode); err != nil {
		t.Fatal(err)
	}
}

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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

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

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

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
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
)

// cloudConfigWriting is a cloud-config that writes files, base64-encoded
// as the provider writes them.
func cloudConfigWriting(files map[string]string) *Bootstrap {
	doc := "#cloud-config\nwrite_files:\n"
	for path, content := range files {
		doc += fmt.Sprintf("- path: %s\n  encoding: b64\n  content: %s\n", path, base64.StdEncoding.EncodeToString([]byte(content)))
	}
	return &Bootstrap{Format: "cloud-config", Data: []byte(doc)}
}

func TestNodeIPFollowsSystemd(t *testing.T) {
	execStart := "ExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS $CAPKV_KUBELET_NODE_IP\n"
	cases := map[string]struct {
		data *Bootstrap
		want string
	}{
		"nothing": {cloudConfigWriting(nil), ""},
		"a drop-in with its own variable": {cloudConfigWriting(map[string]string{
			"/etc/systemd/system/kubelet.service.d/20-capkv-node-ip.conf": "[Service]\nEnvironment=\"CAPKV_KUBELET_NODE_IP=--node-ip=192.168.30.10\"\n" + execStart,
			"/etc/default/kubelet": "KUBELET_EXTRA_ARGS=\n",
		}), "192.168.30.10"},
		"an Environment line loses to the image's environment file": {cloudConfigWriting(map[string]string{
			"/etc/systemd/system/kubelet.service.d/20-x.conf": "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--node-ip=192.168.30.10\"\n",
			"/etc/default/kubelet":                            "KUBELET_EXTRA_ARGS=\n",
		}), ""},
		"the environment file's extra args": {cloudConfigWriting(map[string]string{
			"/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--node-ip=10.1.2.3\n",
		}), "10.1.2.3"},
		"kubeadm's kubeletExtraArgs": {&Bootstrap{Format: "cloud-config", Data: []byte(
			"#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    nodeRegistration:\n      kubeletExtraArgs:\n      - name: node-ip\n        value: 10.9.8.7\nruncmd: [kubeadm join]\n")}, "10.9.8.7"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := NodeIPFlag(tc.data, &kubevirtv1.VirtualMachineInstance{}); err != nil || got != tc.want {
				t.Errorf("nodeIPFlag = %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

// multusVMI runs on the pod network (bound as podBinding says) and a
// Multus network with a DHCP address.
func multusVMI(podBinding string) *kubevirtv1.VirtualMachineInstance {
	pod := kubevirtv1.Interface{Name: "default"}
	if podBinding == "masquerade" {
		pod.Masquerade = &kubevirtv1.InterfaceMasquerade{}
	} else {
		pod.Bridge = &kubevirtv1.InterfaceBridge{}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Spec.Networks = []kubevirtv1.Network{
		{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
		{Name: "tenant", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "tenant"}}},
	}
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{pod, {Name: "tenant", MacAddress: "02:aa:00:00:00:01"}}
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{
		{Name: "default", MAC: "02:00:00:00:00:09", IP: "10.244.1.7", IPs: []string{"10.244.1.7"}},
		{Name: "tenant", MAC: "02:aa:00:00:00:01", IP: "fd00::7", IPs: []string{"fd00::7", "192.168.4.7"}},
	}
	return vmi
}

func TestNodeIPLikeTheKubelet(t *testing.T) {
	// The provider's own script and drop-in, for the tenant interface.
	byMAC := func(mac string) *Bootstrap {
		vmi := multusVMI("masquerade")
		vmi.Spec.Domain.Devices.Interfaces[1].MacAddress = mac
		written := map[string]string{}
		for _, f := range ipam.DHCPNodeIP(&vmi.Spec, "tenant", nil) {
			written[f.Path] = string(f.Contents)
		}
		return cloudConfigWriting(written)
	}
	for name, tc := range map[string]struct {
		data    *Bootstrap
		binding string
		want    string
		fails   bool
	}{
		"no flag, masquerade: the guest's own masquerade address": {cloudConfigWriting(nil), "masquerade", "10.0.2.2", false},
		"no flag, bridge: the pod's address":                      {cloudConfigWriting(nil), "bridge", "10.244.1.7", false},
		"the script: the IPv4 address on the MAC's interface":     {byMAC("02:AA:00:00:00:01"), "masquerade", "192.168.4.7", false},
		"the script, for an interface the guest lacks":            {byMAC("02:bb:00:00:00:01"), "masquerade", "", true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := NodeIP(tc.data, multusVMI(tc.binding))
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), "02:bb:00:00:00:01") {
					t.Fatalf("NodeIP = %q, %v: want the kubelet not to start", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("NodeIP = %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestGuestStaticAddressParsers(t *testing.T) {
	cfg := guestNetConfig{static: map[string][]string{}, dhcp: map[string]bool{}}
	ok := netplanAddresses([]byte("version: 2\nethernets:\n  tenant:\n    match: {macaddress: \"02:AA:00:00:00:01\"}\n    addresses: [192.168.30.10/24]\n"+
		"  pod:\n    match: {macaddress: \"02:AA:00:00:00:03\"}\n    dhcp4: true\n  other:\n    match: {name: \"e*\"}\n    addresses: [10.0.0.1/24]\n"), cfg)
	networkdAddresses([]byte("[Match]\nMACAddress=02:bb:00:00:00:02\n\n[Network]\nAddress=192.168.31.10/24\nAddress=fd00::10/64\n"), cfg.static)
	if !ok || fmt.Sprint(cfg.static["02:aa:00:00:00:01"]) != "[192.168.30.10]" || fmt.Sprint(cfg.static["02:bb:00:00:00:02"]) != "[192.168.31.10 fd00::10]" || len(cfg.static) != 2 {
		t.Errorf("static addresses %v", cfg.static)
	}
	if !cfg.dhcp["02:aa:00:00:00:03"] || cfg.dhcp["02:aa:00:00:00:01"] {
		t.Errorf("DHCP %v, want only the pod entry", cfg.dhcp)
	}
	if netplanAddresses([]byte("version: 1\nconfig: []\n"), guestNetConfig{static: map[string][]string{}, dhcp: map[string]bool{}}) {
		t.Error("version 1 config read")
	}
	// Without network config, cloud-init's fallback runs DHCP on the first
	// interface only; a config runs it where it says.
	none := guestNetConfig{}
	if !none.dhcpOn("02:00:00:00:00:01", true) || none.dhcpOn("02:00:00:00:00:02", false) {
		t.Error("the fallback config is not the first interface's alone")
	}
	cfg.configured = true
	if cfg.dhcpOn("02:aa:00:00:00:09", true) {
		t.Error("a config that does not name an interface ran DHCP on it")
	}
}

func TestExternalCloudProvider(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       bool
	}{
		{"kubeadm v1beta4 list", "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    nodeRegistration:\n      kubeletExtraArgs:\n      - name: cloud-provider\n        value: external\nruncmd: [kubeadm join]\n", true},
		{"kubeadm v1beta3 map", "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    nodeRegistration:\n      kubeletExtraArgs:\n        cloud-provider: external\nruncmd: [kubeadm join]\n", true},
		{"a flag", "#cloud-config\nwrite_files:\n- path: /etc/default/kubelet\n  content: KUBELET_EXTRA_ARGS=--cloud-provider=external\nruncmd: [kubeadm join]\n", true},
		{"external-ish", "#cloud-config\nwrite_files:\n- path: /etc/default/kubelet\n  content: KUBELET_EXTRA_ARGS=--cloud-provider=external-foo\nruncmd: [kubeadm join]\n", false},
		{"another provider", "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    nodeRegistration:\n      kubeletExtraArgs:\n      - name: cloud-provider\n        value: externalish\nruncmd: [kubeadm join]\n", false},
		{"none", "#cloud-config\nruncmd: [kubeadm join]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExternalCloudProvider(&Bootstrap{Format: "cloud-config", Data: []byte(tc.data)}); got != tc.want {
				t.Errorf("ExternalCloudProvider = %v, want %v", got, tc.want)
			}
		})
	}
}

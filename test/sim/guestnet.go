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
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// staticAddresses are the addresses a guest's network configuration gives
// its interfaces, by lower-case MAC: cloud-init network config version 2
// (NoCloud's networkData, inline or from its Secret), or the
// systemd-networkd units an Ignition config writes. A guest takes a static
// address only when its configuration matches the interface's MAC
// (docs/simulator.md#guest-network-configuration).
func (s *Simulator) staticAddresses(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range vmi.Spec.Volumes {
		nc := v.CloudInitNoCloud
		if nc == nil {
			continue
		}
		var data []byte
		switch {
		case nc.NetworkDataSecretRef != nil:
			secret := &corev1.Secret{}
			if err := s.client.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: nc.NetworkDataSecretRef.Name}, secret); err != nil {
				return nil, fmt.Errorf("reading network data Secret %s: %w", nc.NetworkDataSecretRef.Name, err)
			}
			if data = secret.Data["networkdata"]; data == nil {
				data = secret.Data["networkData"]
			}
		case nc.NetworkDataBase64 != "":
			data, _ = base64.StdEncoding.DecodeString(nc.NetworkDataBase64)
		default:
			data = []byte(nc.NetworkData)
		}
		netplanAddresses(data, out)
		return out, nil
	}
	data, err := s.userData(ctx, vmi)
	if err != nil || data == nil || data.Format != "ignition" {
		return out, err
	}
	walkIgnition(data.Data, 0, func(cfg *guestIgnition, _ []byte) {
		for _, f := range cfg.Storage.Files {
			if !strings.HasPrefix(f.Path, "/etc/systemd/network/") || !strings.HasSuffix(f.Path, ".network") {
				continue
			}
			if unit, err := decodeDataURL(f.Contents.Source); err == nil {
				networkdAddresses(unit, out)
			}
		}
	})
	return out, nil
}

// netplanAddresses reads the static addresses of network config v2
// ethernets matched by MAC. Version 1 and other matches configure nothing
// the simulator reports.
func netplanAddresses(data []byte, out map[string][]string) {
	var cfg struct {
		Version   int `json:"version"`
		Ethernets map[string]struct {
			Match     map[string]string `json:"match"`
			Addresses []string          `json:"addresses"`
		} `json:"ethernets"`
	}
	if yaml.Unmarshal(data, &cfg) != nil || cfg.Version != 2 {
		return
	}
	for _, e := range cfg.Ethernets {
		mac := strings.ToLower(e.Match["macaddress"])
		for _, a := range e.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil && mac != "" {
				out[mac] = append(out[mac], p.Addr().String())
			}
		}
	}
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

// nodeIPRE finds the kubelet's --node-ip flag wherever bootstrap data sets
// it: a systemd drop-in or environment file, or kubeadm's kubelet flags.
var nodeIPRE = regexp.MustCompile(`--node-ip[= ]"?([0-9a-fA-F.:]+)`)

// NodeIP is the address the guest's kubelet is told to report with
// --node-ip, or "" when the bootstrap data does not say: cloud-init
// documents and the files they write, or an Ignition config's files.
func NodeIP(data *Bootstrap) string {
	if data == nil {
		return ""
	}
	text := bootstrapText(data)
	if data.Format != "ignition" {
		text += writtenFiles(data.Data)
	}
	if m := nodeIPRE.FindStringSubmatch(text); m != nil {
		if _, err := netip.ParseAddr(m[1]); err == nil {
			return m[1]
		}
	}
	return ""
}

// writtenFiles is the decoded contents of every cloud-config write_files
// entry, which cloud-init writes before any command runs.
func writtenFiles(data []byte) string {
	var buf strings.Builder
	walkCloudInit(data, "", nil, 0, func(doc []byte, _ string) {
		var cfg struct {
			WriteFiles []struct {
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
			buf.Write(content)
			buf.WriteString("\n")
		}
	})
	return buf.String()
}

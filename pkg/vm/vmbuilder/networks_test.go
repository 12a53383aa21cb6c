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

package vmbuilder

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestBuildNetworks(t *testing.T) {
	storage := infrav1.MultusNetwork{Name: "storage", NetworkAttachmentDefinition: "infra/storage"}
	vlan := infrav1.MultusNetwork{Name: "tenant", NetworkAttachmentDefinition: "tenant/c1-tenant", Primary: true}
	sriov := infrav1.MultusNetwork{Name: "fast", NetworkAttachmentDefinition: "fast-net", Binding: infrav1.BindingSRIOV}
	withPod := func(in *Input) {
		s := &in.Spec.VirtualMachineTemplate.Spec.Template.Spec
		s.Networks = []kubevirtv1.Network{{Name: "pod", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
		s.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "pod", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
	}
	tests := []struct {
		name    string
		modify  func(*Input)
		want    []string
		wantErr string
	}{
		{"no networks: template untouched, KubeVirt adds its default", nil, nil, ""},
		{"cluster secondary keeps a masquerade pod network first", func(in *Input) { in.ClusterNetworks = []infrav1.MultusNetwork{storage} },
			[]string{"default:pod:masquerade", "storage:infra/storage:bridge"}, ""},
		{"template pod network kept as written", func(in *Input) { withPod(in); in.ClusterNetworks = []infrav1.MultusNetwork{storage} },
			[]string{"pod:pod:bridge", "storage:infra/storage:bridge"}, ""},
		{"per machine sriov after the cluster's", func(in *Input) {
			in.ClusterNetworks = []infrav1.MultusNetwork{storage}
			in.Spec.Networks = []infrav1.MultusNetwork{sriov}
		}, []string{"default:pod:masquerade", "storage:infra/storage:bridge", "fast:fast-net:sriov"}, ""},
		{"machine network replaces the cluster's of the same name", func(in *Input) {
			in.ClusterNetworks = []infrav1.MultusNetwork{storage}
			in.Spec.Networks = []infrav1.MultusNetwork{{Name: "storage", NetworkAttachmentDefinition: "infra/storage-b", Binding: infrav1.BindingSRIOV}}
		}, []string{"default:pod:masquerade", "storage:infra/storage-b:sriov"}, ""},
		{"primary network replaces the pod network and comes first", func(in *Input) {
			in.ClusterNetworks = []infrav1.MultusNetwork{storage, vlan}
		}, []string{"tenant:tenant/c1-tenant(default):bridge", "storage:infra/storage:bridge"}, ""},
		{"template network of the same name wins", func(in *Input) {
			withPod(in)
			in.ClusterNetworks = []infrav1.MultusNetwork{{Name: "pod", NetworkAttachmentDefinition: "x/y"}}
		}, []string{"pod:pod:bridge"}, ""},
		{"primary with a pod network in the template is refused", func(in *Input) { withPod(in); in.ClusterNetworks = []infrav1.MultusNetwork{vlan} },
			nil, `network "tenant" is primary`},
		{"two primaries are refused", func(in *Input) {
			in.ClusterNetworks = []infrav1.MultusNetwork{vlan}
			in.Spec.Networks = []infrav1.MultusNetwork{{Name: "other", NetworkAttachmentDefinition: "o", Primary: true}}
		}, nil, "at most one network may be primary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			if tt.modify != nil {
				tt.modify(&in)
			}
			vm, err := Build(in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := NetworkSummary(vm.Spec.Template.Spec)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("networks %v, want %v", got, tt.want)
			}
			if len(vm.Spec.Template.Spec.Networks) != len(vm.Spec.Template.Spec.Domain.Devices.Interfaces) {
				t.Errorf("%d networks but %d interfaces", len(vm.Spec.Template.Spec.Networks), len(vm.Spec.Template.Spec.Domain.Devices.Interfaces))
			}
		})
	}
}

func TestBuildDNS(t *testing.T) {
	clusterDNS := &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"tenant.local"}}
	tests := []struct {
		name       string
		modify     func(*Input)
		wantPolicy corev1.DNSPolicy
		wantNS     string
	}{
		{"no defaults: template as written", nil, "", ""},
		{"cluster defaults apply", func(in *Input) { in.DNSPolicy, in.DNSConfig = corev1.DNSNone, clusterDNS }, corev1.DNSNone, "10.96.0.10"},
		{"machine policy overrides all of the cluster's DNS", func(in *Input) {
			in.DNSPolicy, in.DNSConfig = corev1.DNSNone, clusterDNS
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.DNSPolicy = corev1.DNSDefault
		}, corev1.DNSDefault, ""},
		{"machine dnsConfig overrides too", func(in *Input) {
			in.DNSPolicy, in.DNSConfig = corev1.DNSNone, clusterDNS
			in.Spec.VirtualMachineTemplate.Spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}, "", "1.1.1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			if tt.modify != nil {
				tt.modify(&in)
			}
			vm, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			spec := vm.Spec.Template.Spec
			ns := ""
			if spec.DNSConfig != nil && len(spec.DNSConfig.Nameservers) > 0 {
				ns = spec.DNSConfig.Nameservers[0]
			}
			if spec.DNSPolicy != tt.wantPolicy || ns != tt.wantNS {
				t.Errorf("dnsPolicy %q nameserver %q, want %q %q", spec.DNSPolicy, ns, tt.wantPolicy, tt.wantNS)
			}
		})
	}
}

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

package webhooks_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

const testNamespace = "default"

// TestAdmissionRejectsInvalidObjects sends invalid objects of every kind
// to the real API server and checks each is refused with the field path of
// the mistake.
func TestAdmissionRejectsInvalidObjects(t *testing.T) {
	multus := func(name string, def bool) kubevirtv1.Network {
		return kubevirtv1.Network{Name: name, NetworkSource: kubevirtv1.NetworkSource{
			Multus: &kubevirtv1.MultusNetwork{NetworkName: "tenants/" + name, Default: def}}}
	}
	cases := []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"running and runStrategy together", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.Running = ptr.To(true)
		}), vmSpec + ".running"},
		{"unknown run strategy", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.RunStrategy = ptr.To(kubevirtv1.VirtualMachineRunStrategy("Sometimes"))
		}), vmSpec + ".runStrategy"},
		{"no VMI template", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.Template = nil
		}), vmSpec + ".template"},
		{"disk without volume", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[0].Name = "other"
		}), disks + "[0].name"},
		{"disk name not a DNS label", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[0].Name, s.Volumes[0].Name = "Root_Disk", "Root_Disk"
		}), disks + "[0].name"},
		{"duplicate disk", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, s.Domain.Devices.Disks[0])
		}), disks + "[1].name"},
		{"duplicate volume", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Volumes = append(s.Volumes, s.Volumes[0])
		}), vmiSpec + ".volumes[1].name"},
		{"volume with two sources", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Volumes[0].EmptyDisk = &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}
		}), vmiSpec + ".volumes[0]"},
		{"volume without source", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{}
		}), vmiSpec + ".volumes[0]"},
		{"boot order zero", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[0].BootOrder = ptr.To[uint](0)
		}), disks + "[0].bootOrder"},
		{"duplicate boot order", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[0].BootOrder = ptr.To[uint](1)
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "data", BootOrder: ptr.To[uint](1)})
			s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
				EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
		}), disks + "[1].bootOrder"},
		{"IDE bus", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[0].Disk.Bus = "ide"
		}), disks + "[0].disk.bus"},
		{"DataVolume template not used by a volume", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Name = "unused"
		}), dvt + ".metadata.name"},
		{"DataVolume template without name", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Name = ""
		}), dvt + ".metadata.name"},
		{"DataVolume template with pvc and storage", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Spec.PVC = &corev1.PersistentVolumeClaimSpec{}
		}), dvt + ".spec"},
		{"DataVolume template without source", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Spec.Source = nil
		}), dvt + ".spec.source"},
		{"DataVolume template with two sources", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Spec.Source.HTTP = &cdiv1.DataVolumeSourceHTTP{URL: "https://images.example.com/ubuntu.qcow2"}
		}), dvt + ".spec.source"},
		{"DataVolume sourceRef not a DataSource", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Spec.Source = nil
			t.Spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: "PersistentVolumeClaim", Name: "golden"}
		}), dvt + ".spec.sourceRef.kind"},
		{"DataVolume template in another namespace", withDataVolume(func(t *kubevirtv1.DataVolumeTemplateSpec) {
			t.Namespace = "elsewhere"
		}), dvt + ".metadata.namespace"},
		{"interface without network", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks = nil
			s.Domain.Devices.Interfaces[0].Name = "default"
		}), ifaces + "[0].name"},
		{"network without interface", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks = append(s.Networks, multus("storage", false))
		}), networks + "[1].name"},
		{"two pod networks", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks = append(s.Networks, kubevirtv1.Network{Name: "second", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}})
			s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, kubevirtv1.Interface{Name: "second",
				InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
		}), networks},
		{"pod network and default Multus network", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks = append(s.Networks, multus("primary", true))
			s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, kubevirtv1.Interface{Name: "primary",
				InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
		}), networks},
		{"interface with a binding plugin and a method", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Interfaces[0].Binding = &kubevirtv1.PluginBinding{Name: "passt"}
		}), ifaces + "[0]"},
		{"masquerade on a Multus network", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks[0] = multus("default", false)
			s.Domain.Devices.Interfaces[0].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
		}), ifaces + "[0].masquerade"},
		{"removed slirp binding", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Interfaces[0].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{DeprecatedSlirp: &kubevirtv1.DeprecatedInterfaceSlirp{}}
		}), ifaces + "[0]"},
		{"instance type with memory request", machine(func(m *infrav1.KubevirtMachine) {
			vm := &m.Spec.VirtualMachineTemplate.Spec
			vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.medium"}
			vm.Template.Spec.Domain.CPU, vm.Template.Spec.Domain.Memory = nil, nil
			vm.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}), vmiSpec + ".domain.resources.requests[memory]"},
		{"instance type with CPU cores", machine(func(m *infrav1.KubevirtMachine) {
			vm := &m.Spec.VirtualMachineTemplate.Spec
			vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.medium"}
			vm.Template.Spec.Domain.Memory = nil
		}), vmiSpec + ".domain.cpu.cores"},
		{"instance type with guest memory", machine(func(m *infrav1.KubevirtMachine) {
			vm := &m.Spec.VirtualMachineTemplate.Spec
			vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.medium"}
			vm.Template.Spec.Domain.CPU = nil
		}), vmiSpec + ".domain.memory.guest"},
		{"no memory", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = nil
		}), vmiSpec + ".domain.memory.guest"},
		{"hostname not a DNS label", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Hostname = "node.example.com"
		}), vmiSpec + ".hostname"},
		{"unknown eviction strategy", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.EvictionStrategy = ptr.To(kubevirtv1.EvictionStrategy("Drain"))
		}), vmiSpec + ".evictionStrategy"},
		{"reserved template label", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.Spec.Template.ObjectMeta.Labels = map[string]string{kubevirtv1.NodeNameLabel: "node-1"}
		}), vmSpec + ".template.metadata.labels[kubevirt.io/nodeName]"},
		{"probe with two handlers", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.ReadinessProbe = &kubevirtv1.Probe{Handler: kubevirtv1.Handler{
				GuestAgentPing: &kubevirtv1.GuestAgentPing{}, Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}), vmiSpec + ".readinessProbe"},
		{"TCP probe without a pod network", vmi(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Networks[0] = multus("default", true)
			s.ReadinessProbe = &kubevirtv1.Probe{Handler: kubevirtv1.Handler{TCPSocket: &corev1.TCPSocketAction{}}}
		}), vmiSpec + ".readinessProbe"},
		{"providerID of another provider", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.ProviderID = ptr.To("aws:///us-east-1a/i-0123")
		}), "spec.providerID"},
		{"unknown bootstrap check", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.BootstrapCheckSpec.CheckStrategy = "ping"
		}), "spec.virtualMachineBootstrapCheck.checkStrategy"},
		{"guest-agent check beside the user's own readiness probe", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyGuestAgent
			m.Spec.VirtualMachineTemplate.Spec.Template.Spec.ReadinessProbe = &kubevirtv1.Probe{
				Handler: kubevirtv1.Handler{GuestAgentPing: &kubevirtv1.GuestAgentPing{}}}
		}), "spec.virtualMachineTemplate.spec.template.spec.readinessProbe"},
		{"node address network that is no network name", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NodeAddressNetwork = "Storage_Net"
		}), "spec.nodeAddressNetwork"},
		{"pool reference with a lower-case kind", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant",
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "inclusterippool", Name: "pool"}}}}
		}), "spec.networkAddresses[0].addressesFromPools[0].kind"},
		{"pool reference with an API group that is no DNS name", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant",
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam_cluster", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.networkAddresses[0].addressesFromPools[0].apiGroup"},
		{"gateway that is no address", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant", Gateway: "192.168.10.1/24",
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.networkAddresses[0].gateway"},
		{"nameserver that is no address", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant", Nameservers: []string{"dns.example.com"},
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.networkAddresses[0].nameservers[0]"},
		{"pool addresses on the pod network", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Networks[0].Name,
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.networkAddresses[0].network"},
		{"pool addresses beside the user's network data", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.UserData.NetworkDataSecretRef = &corev1.LocalObjectReference{Name: "netdata"}
			m.Spec.NetworkAddresses = []infrav1.NetworkAddressesSpec{{Network: "tenant",
				AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "pool"}}}}
		}), "spec.userData.networkDataSecretRef"},
		{"custom policy named like the provider's own", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{{Name: "api-server"}}
		}), "spec.customNetworkPolicies[0].name"},
		{"unknown cloud-init data source", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.UserData.CloudInitDataSource = "Metadata"
		}), "spec.userData.cloudInitDataSource"},
		{"root disk image from an ftp URL", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "ftp://images/a.qcow2"}}, DiskSize: resource.MustParse("20Gi")}
		}), "spec.rootDisk.image.http.url"},
		{"root disk with two image sources", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{
				HTTP: &infrav1.HTTPImageSource{URL: "https://images/a.qcow2"}, PVC: &infrav1.ImageVolumeRef{Name: "seed"}}, DiskSize: resource.MustParse("20Gi")}
		}), "spec.rootDisk.image"},
		{"golden image larger than the disk", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://images/a.qcow2"}},
				DiskSize: resource.MustParse("10Gi"), ImageSize: ptr.To(resource.MustParse("20Gi"))}
		}), "spec.rootDisk.imageSize"},
		{"per-VM import of an admin PVC", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Name: "seed"}},
				DiskSize: resource.MustParse("10Gi"), CloneStrategy: infrav1.CloneStrategyPerVMImport}
		}), "spec.rootDisk.cloneStrategy"},
		{"data disk named like a template disk", machine(func(m *infrav1.KubevirtMachine) {
			name := m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.Disks[0].Name
			m.Spec.DataDisks = []infrav1.DataDiskSpec{{Name: name, DiskSize: resource.MustParse("10Gi")}}
		}), "spec.dataDisks[0].name"},
		{"data disk of zero size", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.DataDisks = []infrav1.DataDiskSpec{{Name: "data", DiskSize: resource.MustParse("0")}}
		}), "spec.dataDisks[0].diskSize"},
		{"infra cluster reference to a ConfigMap", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "ConfigMap", Name: "kubeconfig"}
		}), "spec.infraClusterSecretRef.kind"},
		{"infra cluster reference without name", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret"}
		}), "spec.infraClusterSecretRef.name"},
		{"invalid VM label", machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"bad key!": "x"}
		}), "spec.virtualMachineTemplate.metadata.labels"},
		{"endpoint host not a DNS name", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.ControlPlaneEndpoint.Host = "api_server!"
		}), "spec.controlPlaneEndpoint.host"},
		{"endpoint port out of range", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.ControlPlaneEndpoint.Port = 70000
		}), "spec.controlPlaneEndpoint.port"},
		{"ExternalName service", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeExternalName
		}), "spec.controlPlaneServiceTemplate.spec.type"},
		{"service namespace not a DNS label", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace = "Tenant_NS"
		}), "spec.controlPlaneServiceTemplate.metadata.namespace"},
		{"SSH key reference to a ConfigMap", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.SSHKeys.ConfigRef = &corev1.ObjectReference{Kind: "ConfigMap", Name: "keys"}
		}), "spec.sshKeys.configRef.kind"},
		{"SSH key Secret name invalid", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.SSHKeys.DataSecretName = ptr.To("Keys!")
		}), "spec.sshKeys.dataSecretName"},
		{"denied CIDR that is no CIDR", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Isolation.DeniedCIDRs = []string{"10.0.0.0/8", "10.300.0.0/16"}
		}), "spec.isolation.deniedCIDRs[1]"},
		{"unknown isolation mode", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Isolation.Mode = "Off"
		}), "spec.isolation.mode"},
		{"dnsPolicy None without nameservers", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.DNSPolicy = corev1.DNSNone
		}), "spec.dnsConfig.nameservers"},
		{"nameserver that is no IP", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"dns.example.com"}}
		}), "spec.dnsConfig.nameservers[0]"},
		{"two primary networks", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Network.Networks = []infrav1.MultusNetwork{{Name: "a", NetworkAttachmentDefinition: "a", Primary: true}}
			c.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: infrav1.NamespacedRef{Namespace: "t", Name: "vlan"}, Primary: true}
		}), "spec.network"},
		{"network attachment not ns/name", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Network.Networks = []infrav1.MultusNetwork{{Name: "a", NetworkAttachmentDefinition: "Infra/Net_1"}}
		}), "spec.network.networks[0].networkAttachmentDefinition"},
		{"cluster network named like the per-cluster one", cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Network.Networks = []infrav1.MultusNetwork{{Name: "tenant", NetworkAttachmentDefinition: "x"}}
			c.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: infrav1.NamespacedRef{Namespace: "t", Name: "vlan"}}
		}), "spec.network.networks[0].name"},
		{"primary machine network beside the template's pod network", machine(func(m *infrav1.KubevirtMachine) {
			s := &m.Spec.VirtualMachineTemplate.Spec.Template.Spec
			s.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
			s.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultBridgeNetworkInterface()}
			m.Spec.Networks = []infrav1.MultusNetwork{{Name: "vlan", NetworkAttachmentDefinition: "vlan", Primary: true}}
		}), "spec.networks[0].primary"},
		{"machine template with a providerID", machineTemplate(func(t *infrav1.KubevirtMachineTemplate) {
			t.Spec.Template.Spec.ProviderID = ptr.To("kubevirt://vm-1")
		}), "spec.template.spec.providerID"},
		{"machine template without VMI template", machineTemplate(func(t *infrav1.KubevirtMachineTemplate) {
			t.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template = nil
		}), "spec.template.spec.virtualMachineTemplate.spec.template"},
		{"machine template metadata label invalid", machineTemplate(func(t *infrav1.KubevirtMachineTemplate) {
			t.Spec.Template.ObjectMeta.Labels = map[string]string{"-bad": "x"}
		}), "spec.template.metadata.labels"},
		{"cluster template endpoint host invalid", clusterTemplate(func(t *infrav1.KubevirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneEndpoint.Host = "-bad-"
		}), "spec.template.spec.controlPlaneEndpoint.host"},
		{"cluster template infra reference without name", clusterTemplate(func(t *infrav1.KubevirtClusterTemplate) {
			t.Spec.Template.Spec.InfraClusterSecretRef = &corev1.ObjectReference{}
		}), "spec.template.spec.infraClusterSecretRef.name"},
		{"remediation retry limit above 10", &infrav1.KubevirtRemediation{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace},
			Spec:       infrav1.KubevirtRemediationSpec{RetryLimit: 11},
		}, "spec.retryLimit"},
		{"remediation template negative timeout", &infrav1.KubevirtRemediationTemplate{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace},
			Spec: infrav1.KubevirtRemediationTemplateSpec{Template: infrav1.KubevirtRemediationTemplateResource{
				Spec: infrav1.KubevirtRemediationSpec{TimeoutSeconds: -5}}},
		}, "spec.template.spec.timeoutSeconds"},
		{"remediation template metadata label invalid", &infrav1.KubevirtRemediationTemplate{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: testNamespace},
			Spec: infrav1.KubevirtRemediationTemplateSpec{Template: infrav1.KubevirtRemediationTemplateResource{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"-bad": "x"}}}},
		}, "spec.template.metadata.labels"},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.obj)
			expectInvalid(t, err, tc.field)
		})
	}
}

// TestAdmissionAcceptsCommunityManifestsUnchanged applies manifests written
// for the community KubeVirt provider and checks that each is accepted and
// that every field it sets reads back with the same value. A manifest that
// puts VMs or networks in a namespace of its own is applied there, as
// written for; the external-infra one, whose kubeconfig Secret sits in the
// community provider's namespace, once an administrator has granted it.
func TestAdmissionAcceptsCommunityManifestsUnchanged(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "capk-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	writtenFor := map[string]string{
		"kubevirtmachine-instancetype.yaml":          "tenants",
		"kubevirtmachinetemplate-containerdisk.yaml": "default",
		"kubevirtmachinetemplate-persistent.yaml":    "default",
	}
	for _, name := range writtenFor {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	grant := &infrav1.KubevirtClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "capk-external-infra"},
		Spec: infrav1.KubevirtClusterIdentitySpec{
			SecretRef:         &infrav1.IdentitySecretReference{Namespace: "capk-system", Name: "external-infra-kubeconfig"},
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{ns.Name}},
			InfraNamespaces:   []string{"tenant-infra"},
		}}
	if err := env.Client.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, grant) })
	for name, u := range capkManifests(t) {
		t.Run(name, func(t *testing.T) {
			want := u.DeepCopy()
			obj := u.DeepCopy()
			obj.SetNamespace(ns.Name)
			if n, ok := writtenFor[name]; ok {
				obj.SetNamespace(n)
			}
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatal(err)
			}
			if ok, path := isSubset(want.Object["spec"], got.Object["spec"], "spec"); !ok {
				t.Errorf("field %s changed: wrote %v, read back %v", path, want.Object["spec"], got.Object["spec"])
			}
		})
	}
}

// TestAdmissionUpdates checks what may change on live objects. The
// controllers write status concurrently, so each update starts from the
// latest version and is retried on conflicts.
func TestAdmissionUpdates(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, obj client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating: %v", err)
		}
	}
	update := func(obj client.Object, mutate func(), opts ...client.UpdateOption) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			mutate()
			return env.Client.Update(ctx, obj, opts...)
		})
	}

	t.Run("per-cluster network cannot change once set", func(t *testing.T) {
		kc := cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: infrav1.NamespacedRef{Namespace: "t", Name: "vlan"}, VLANID: ptr.To[int32](100)}
		}).(*infrav1.KubevirtCluster)
		create(t, kc)
		expectInvalid(t, update(kc, func() { kc.Spec.Network.PerCluster.VLANID = ptr.To[int32](200) }), "spec.network.perCluster")
		expectInvalid(t, update(kc, func() { kc.Spec.Network.PerCluster = nil }), "spec.network.perCluster")
		expectInvalid(t, update(kc, func() { kc.Spec.ControlPlaneServiceTemplate.ObjectMeta.Namespace = "elsewhere" }),
			"spec.controlPlaneServiceTemplate.metadata.namespace")
		if err := update(kc, func() { kc.Spec.Isolation.Mode = infrav1.IsolationDisabled }); err != nil {
			t.Errorf("turning isolation off was refused: %v", err)
		}
	})
	t.Run("machine template spec is immutable", func(t *testing.T) {
		tmpl := machineTemplate(func(*infrav1.KubevirtMachineTemplate) {}).(*infrav1.KubevirtMachineTemplate)
		create(t, tmpl)
		expectInvalid(t, update(tmpl, func() { tmpl.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyNone }),
			"spec.template.spec")
	})
	t.Run("machine template accepts the topology controller's dry run", func(t *testing.T) {
		tmpl := machineTemplate(func(*infrav1.KubevirtMachineTemplate) {}).(*infrav1.KubevirtMachineTemplate)
		create(t, tmpl)
		err := update(tmpl, func() {
			tmpl.Annotations = map[string]string{"topology.cluster.x-k8s.io/dry-run": ""}
			tmpl.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyNone
		}, client.DryRunAll)
		if err != nil {
			t.Fatalf("dry run refused: %v", err)
		}
		err = update(tmpl, func() { tmpl.Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategyNone }, client.DryRunAll)
		expectInvalid(t, err, "spec.template.spec")
	})
	t.Run("cluster template spec is immutable", func(t *testing.T) {
		tmpl := clusterTemplate(func(*infrav1.KubevirtClusterTemplate) {}).(*infrav1.KubevirtClusterTemplate)
		create(t, tmpl)
		expectInvalid(t, update(tmpl, func() { tmpl.Spec.Template.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeNodePort }),
			"spec.template.spec")
	})
	t.Run("machine providerID can be set once", func(t *testing.T) {
		m := machine(func(*infrav1.KubevirtMachine) {}).(*infrav1.KubevirtMachine)
		create(t, m)
		if err := update(m, func() { m.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + m.Name) }); err != nil {
			t.Fatalf("setting providerID refused: %v", err)
		}
		expectInvalid(t, update(m, func() { m.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + "other") }), "spec.providerID")
	})
	t.Run("machine VM template is immutable", func(t *testing.T) {
		m := machine(func(*infrav1.KubevirtMachine) {}).(*infrav1.KubevirtMachine)
		create(t, m)
		expectInvalid(t, update(m, func() { m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Hostname = "renamed" }), "spec")
	})
	t.Run("machine grows in place only while Cluster API updates it", func(t *testing.T) {
		m := machine(func(m *infrav1.KubevirtMachine) {
			d := &m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
			d.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 2, MaxSockets: 4}
			d.Memory.MaxGuest = ptr.To(resource.MustParse("8Gi"))
		}).(*infrav1.KubevirtMachine)
		create(t, m)
		grow := func(sockets uint32, guest string, inPlace bool) error {
			return update(m, func() {
				if inPlace {
					m.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
				}
				d := &m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
				d.CPU.Sockets, d.Memory.Guest = sockets, ptr.To(resource.MustParse(guest))
			})
		}
		err := grow(2, "4Gi", false)
		expectInvalid(t, err, "spec")
		if !strings.Contains(err.Error(), "updates it in place where it can") {
			t.Errorf("the refusal does not point to in-place updates: %v", err)
		}
		// KubeadmControlPlane asks with a dry run, without the annotation.
		growDry := func(sockets uint32) error {
			return update(m, func() { m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.Sockets = sockets }, client.DryRunAll)
		}
		if err := growDry(2); err != nil {
			t.Errorf("a dry run of an in-place update refused: %v", err)
		}
		expectInvalid(t, growDry(6), "spec")
		if err := grow(2, "4Gi", true); err != nil {
			t.Fatalf("an in-place update within the maxima refused: %v", err)
		}
		err = grow(6, "4Gi", true)
		expectInvalid(t, err, "spec")
		if !strings.Contains(err.Error(), "cannot change in place: CPU sockets 2 to 6: beyond the VM's maxSockets, 4") {
			t.Errorf("the refusal does not say why: %v", err)
		}
		err = update(m, func() { m.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.CPU.Cores = 4 })
		expectInvalid(t, err, "spec")
		if !strings.Contains(err.Error(), "spec.virtualMachineTemplate.spec.template.spec.domain.cpu.cores changed") {
			t.Errorf("the refusal does not name the field: %v", err)
		}
	})
	t.Run("machine disks grow in place, never shrink", func(t *testing.T) {
		m := machine(func(m *infrav1.KubevirtMachine) {
			m.Spec.RootDisk = &infrav1.RootDiskSpec{DiskSize: resource.MustParse("20Gi"),
				Image: infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "http://images.test/node.qcow2"}}}
		}).(*infrav1.KubevirtMachine)
		create(t, m)
		resize := func(size string) error {
			return update(m, func() {
				m.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
				m.Spec.RootDisk.DiskSize = resource.MustParse(size)
			})
		}
		if err := resize("30Gi"); err != nil {
			t.Fatalf("a larger root disk refused in place: %v", err)
		}
		err := resize("10Gi")
		expectInvalid(t, err, "spec")
		if !strings.Contains(err.Error(), "cannot change in place: root disk 30Gi to 10Gi: a claim never shrinks") {
			t.Errorf("the refusal does not say why: %v", err)
		}
	})
	t.Run("cluster endpoint stays once set", func(t *testing.T) {
		c := cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "10.0.0.10", Port: 6443}
		}).(*infrav1.KubevirtCluster)
		create(t, c)
		expectInvalid(t, update(c, func() { c.Spec.ControlPlaneEndpoint.Host = "10.0.0.11" }), "spec.controlPlaneEndpoint.host")
	})
	t.Run("cluster endpoint can be filled in", func(t *testing.T) {
		c := cluster(func(*infrav1.KubevirtCluster) {}).(*infrav1.KubevirtCluster)
		create(t, c)
		if err := update(c, func() { c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "10.0.0.12", Port: 6443} }); err != nil {
			t.Fatalf("setting the endpoint refused: %v", err)
		}
	})
	t.Run("cluster infra reference cannot move", func(t *testing.T) {
		c := cluster(func(c *infrav1.KubevirtCluster) {
			c.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Name: "infra-a"}
		}).(*infrav1.KubevirtCluster)
		create(t, c)
		expectInvalid(t, update(c, func() { c.Spec.InfraClusterSecretRef.Name = "infra-b" }), "spec.infraClusterSecretRef")
	})
}

// TestAdmissionDefaults checks the defaults the webhooks fill in.
func TestAdmissionDefaults(t *testing.T) {
	ctx := context.Background()
	m := machine(func(m *infrav1.KubevirtMachine) {
		m.Spec.VirtualMachineTemplate.Spec.RunStrategy = nil
		m.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Name: "infra"}
	}).(*infrav1.KubevirtMachine)
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if rs := m.Spec.VirtualMachineTemplate.Spec.RunStrategy; rs == nil || *rs != kubevirtv1.RunStrategyAlways {
		t.Errorf("runStrategy = %v, want Always", rs)
	}
	if ref := m.Spec.InfraClusterSecretRef; ref.Kind != "Secret" || ref.APIVersion != "v1" {
		t.Errorf("infraClusterSecretRef = %s/%s, want v1/Secret", ref.APIVersion, ref.Kind)
	}
	c := cluster(func(*infrav1.KubevirtCluster) {}).(*infrav1.KubevirtCluster)
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Spec.ControlPlaneServiceTemplate.Spec.Type; got != corev1.ServiceTypeClusterIP {
		t.Errorf("service type = %q, want ClusterIP", got)
	}
	// A legacy "running: true" manifest keeps its field and gets no run strategy.
	legacy := machine(func(m *infrav1.KubevirtMachine) {
		m.Spec.VirtualMachineTemplate.Spec.RunStrategy = nil
		m.Spec.VirtualMachineTemplate.Spec.Running = ptr.To(true)
	}).(*infrav1.KubevirtMachine)
	if err := env.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if vm := legacy.Spec.VirtualMachineTemplate.Spec; vm.RunStrategy != nil || vm.Running == nil || !*vm.Running {
		t.Errorf("legacy running field rewritten: running=%v runStrategy=%v", vm.Running, vm.RunStrategy)
	}
}

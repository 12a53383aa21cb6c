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

package integration

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// ignitionV2Config is Ignition spec 2.3.0, what Cluster API's kubeadm
// bootstrap provider emits for Flatcar.
const ignitionV2Config = `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/kubeadm.sh","mode":448,"contents":{"source":"data:,kubeadm%20join"}}]}}`

const ignitionConfig = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/kubeadm.sh","mode":448,"contents":{"source":"data:,kubeadm%20join"}}]}}`

// userDataVolume returns the VM's user data volume.
func userDataVolume(t *testing.T, vm *kubevirtv1.VirtualMachine) kubevirtv1.Volume {
	t.Helper()
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == vmbuilder.UserDataVolume {
			return v
		}
	}
	t.Fatalf("VM %s has no user data volume", vm.Name)
	return kubevirtv1.Volume{}
}

func TestCloudConfigOnNoCloud(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "nocloud-0"})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, km.Name)).Should(Equal("joined"))

	km = get(t, tc.c, km)
	g.Expect(km.Spec.ProviderID).To(HaveValue(Equal("kubevirt://nocloud-0")))
	g.Expect(km.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	v := userDataVolume(t, vm)
	g.Expect(v.CloudInitNoCloud).NotTo(BeNil())
	g.Expect(v.CloudInitNoCloud.UserDataSecretRef.Name).To(Equal("nocloud-0-userdata"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(infrav1.ClusterNameLabel, "tenant"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(infrav1.RoleLabel, infrav1.RoleWorker))
	g.Expect(vm.OwnerReferences).To(ConsistOf(HaveField("UID", km.UID)))

	secret := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "nocloud-0-userdata", secret)).To(Succeed())
	// Nothing is added for checkStrategy none: the user's data goes as is.
	g.Expect(string(secret.Data["userdata"])).To(Equal(fixture.ValidCloudConfig))
	g.Expect(secret.OwnerReferences).To(ConsistOf(HaveField("UID", vm.UID)))
	g.Expect(secret.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineLabel, km.Name))
	g.Expect(secret.Labels).NotTo(HaveKey(infrav1.ClusterNameLabel), "Cluster API's own Secrets carry the cluster's name; a KubeadmControlPlane adopts them")

	// Addresses: the pod IP as InternalIP, then hostname.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(km.Status.Addresses).To(HaveLen(3))
	g.Expect(km.Status.Addresses[0]).To(Equal(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: vmi.Status.Interfaces[0].IP}))
	g.Expect(km.Status.Addresses[1]).To(Equal(clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: "nocloud-0"}))
}

func TestCloudConfigOnConfigDrive(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "configdrive-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.UserData.CloudInitDataSource = infrav1.CloudInitConfigDrive
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, km.Name)).Should(Equal("joined"))
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	v := userDataVolume(t, vm)
	g.Expect(v.CloudInitNoCloud).To(BeNil())
	g.Expect(v.CloudInitConfigDrive).NotTo(BeNil())
	g.Expect(v.CloudInitConfigDrive.UserDataSecretRef.Name).To(Equal("configdrive-0-userdata"))
}

func TestIgnition(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "flatcar-0", Format: "ignition", Data: ignitionConfig, Mutate: bootFlatcar})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	// The simulated guest parsed it with Ignition's own parser.
	eventually(t, guestOutcome(w.Env.Client, tc.ns, km.Name)).Should(Equal("joined"))
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(userDataVolume(t, vm).CloudInitConfigDrive).NotTo(BeNil())
	secret := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "flatcar-0-userdata", secret)).To(Succeed())
	g.Expect(string(secret.Data["userdata"])).To(Equal(ignitionConfig))

	// Spec 2.3 with the ssh check: the provider's additions are a parent
	// config that appends the user's, which Flatcar's parser accepts.
	v2 := tc.newMachine(t, fixture.MachineOptions{Name: "flatcar-1", Format: "ignition", Data: ignitionV2Config, Mutate: func(km *infrav1.KubevirtMachine) {
		bootFlatcar(km)
		withCheck(infrav1.CheckStrategySSH)(km)
	}})
	eventually(t, tc.provisioned(v2)).Should(Succeed())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, v2.Name)).Should(Equal("joined"))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "flatcar-1-userdata", secret)).To(Succeed())
	g.Expect(string(secret.Data["userdata"])).To(ContainSubstring(`"append"`))
}

// bootFlatcar boots the machine from a Flatcar image with Kubernetes, named
// as image-builder names it: an Ubuntu image reads no Ignition.
func bootFlatcar(km *infrav1.KubevirtMachine) {
	for i := range km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Volumes {
		if v := &km.Spec.VirtualMachineTemplate.Spec.Template.Spec.Volumes[i]; v.ContainerDisk != nil {
			v.ContainerDisk.Image = "registry.example/flatcar-stable-kube-v1.34.1:4230.2.0"
		}
	}
}

func TestInvalidIgnitionIsReported(t *testing.T) {
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "broken-ign", Format: "ignition", Data: `{"ignition":`,
		Mutate: func(km *infrav1.KubevirtMachine) { km.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategySSH }})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.BootstrapDataInvalidReason))
	// The Secret's content is not quoted back.
	cur := get(t, tc.c, km)
	NewWithT(t).Expect(condition(cur, infrav1.VirtualMachineReadyCondition)).NotTo(ContainSubstring(`{"ignition":`))
}

func TestStaticNetworkData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	networkData := "version: 2\nethernets:\n  enp1s0:\n    addresses: [192.168.10.21/24]\n    gateway4: 192.168.10.1\n"
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "static-0-net", Namespace: tc.ns},
		Data: map[string][]byte{"networkData": []byte(networkData)}})).To(Succeed())
	km := tc.newMachine(t, fixture.MachineOptions{Name: "static-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.UserData.NetworkDataSecretRef = &corev1.LocalObjectReference{Name: "static-0-net"}
	}})
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vm)).To(Succeed())
	g.Expect(userDataVolume(t, vm).CloudInitNoCloud.NetworkDataSecretRef).To(HaveField("Name", "static-0-userdata"))
	secret := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "static-0-userdata", secret)).To(Succeed())
	g.Expect(string(secret.Data["networkdata"])).To(Equal(networkData))
}

func TestMissingNetworkDataIsReported(t *testing.T) {
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "static-1", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.UserData.NetworkDataSecretRef = &corev1.LocalObjectReference{Name: "absent"}
	}})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.BootstrapDataInvalidReason))
	// Creating the Secret is an event the provider follows.
	NewWithT(t).Expect(w.Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: tc.ns},
		Data: map[string][]byte{"networkdata": []byte("version: 2\n")}})).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
}

func TestWaitsForBootstrapData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "late-0", NoBootstrap: true})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.WaitingForBootstrapDataReason))
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{})).NotTo(Succeed())

	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late-0-bootstrap", Namespace: tc.ns},
		Data: map[string][]byte{"value": []byte(fixture.ValidCloudConfig)}})).To(Succeed())
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "late-0", Namespace: tc.ns}})
	m.Spec.Bootstrap.DataSecretName = ptrTo("late-0-bootstrap")
	g.Expect(w.Env.Client.Update(ctx, m)).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
}

func ptrTo(s string) *string { return &s }

func TestControlPlaneRoleAndFailureDomain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "cp-0", ControlPlane: true, NoBootstrap: true})
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Namespace: tc.ns}})
	m.Spec.FailureDomain = "zone-b"
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cp-0-bootstrap", Namespace: tc.ns},
		Data: map[string][]byte{"value": []byte(fixture.ValidCloudConfig)}})).To(Succeed())
	m.Spec.Bootstrap.DataSecretName = ptrTo("cp-0-bootstrap")
	g.Expect(w.Env.Client.Update(ctx, m)).To(Succeed())
	eventually(t, tc.provisioned(km)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.Status.NodeName).To(Equal("infra-b"))
	g.Expect(vmi.Labels).To(HaveKeyWithValue(infrav1.RoleLabel, infrav1.RoleControlPlane))
	g.Expect(get(t, tc.c, km).Status.FailureDomain).To(Equal("zone-b"))
	g.Expect(strings.HasPrefix(*get(t, tc.c, km).Spec.ProviderID, infrav1.ProviderIDPrefix)).To(BeTrue())
}

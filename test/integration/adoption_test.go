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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestCommunityVMAdoptedInPlace runs a machine whose VM the community
// provider made, as it leaves it (fixture.CommunityMachine), with the real
// virt-controller running its instance: the provider adopts the VM, the
// instance and the user data Secret in place, with an Event and the
// Adopted reason, and KubeVirt asks for no restart. A VM that only shares
// a machine's name, or whose community labels name another machine, stays
// refused with NameConflict and untouched; one the multi-tenancy policy
// refuses is not adopted either.
func TestCommunityVMAdoptedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := ownedCluster(t, nil)
	// Named after the Machine's bootstrap Secret, as the community
	// provider names it: not the provider's own <machine>-userdata.
	vm, secret := fixture.CommunityMachine(tc.ns, "community-0", fixture.ClusterName, "community-0-bootstrap", false, []byte(fixture.ValidCloudConfig))
	g.Expect(w.Env.Client.Create(ctx, secret)).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, vm)).To(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, func() kubevirtv1.VirtualMachineInstancePhase {
		_ = infraGet(t, w.Env.Client, tc.ns, vm.Name, vmi)
		return vmi.Status.Phase
	}).Should(Equal(kubevirtv1.Running))
	instance := vmi.UID

	// Same name, no community labels; and community labels of another
	// machine.
	nameOnly := fixture.SmallVM()
	stranger := &kubevirtv1.VirtualMachine{}
	stranger.Namespace, stranger.Name, stranger.Spec = tc.ns, "stranger-0", nameOnly
	elsewhere, _ := fixture.CommunityMachine(tc.ns, "elsewhere-0", fixture.ClusterName, "elsewhere-0", false, nil)
	elsewhere.Labels[adoption.CommunityMachineNameLabel] = "another-machine"
	for _, v := range []*kubevirtv1.VirtualMachine{stranger, elsewhere} {
		v.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
		g.Expect(w.Env.Client.Create(ctx, v)).To(Succeed())
	}

	// The ssh check, the community manifests' default, cannot log into a
	// guest whose host key the provider never injected: the community
	// provider's check stands.
	km := tc.newMachine(t, fixture.MachineOptions{Name: "community-0", Mutate: func(km *infrav1.KubevirtMachine) {
		km.Spec.BootstrapCheckSpec.CheckStrategy = infrav1.CheckStrategySSH
	}})
	eventually(t, tc.reason(km, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.AdoptedReason))
	eventually(t, tc.provisioned(km)).Should(Succeed())
	g.Expect(tc.reason(km, infrav1.BootstrapSucceededCondition)()).To(Equal(infrav1.AdoptedReason))
	g.Expect(machineEvents(t, tc, km)).To(ContainElement(infrav1.AdoptedReason))

	adopted := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, vm.Name, adopted)).To(Succeed())
	g.Expect(adopted.UID).To(Equal(vm.UID), "the same VM")
	g.Expect(adopted.Annotations).To(HaveKeyWithValue(infrav1.OwnerAnnotation, tc.ns+"/community-0"))
	g.Expect(adopted.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineNamespaceLabel, tc.ns))
	g.Expect(adopted.Spec.Template.ObjectMeta.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineLabel, "community-0"),
		"the next instance carries the provider's labels")
	g.Expect(adopted.OwnerReferences).To(ContainElement(HaveField("UID", km.UID)))
	g.Consistently(func() []kubevirtv1.VirtualMachineConditionType {
		var types []kubevirtv1.VirtualMachineConditionType
		for _, c := range get(t, w.Env.Client, adopted).Status.Conditions {
			types = append(types, c.Type)
		}
		return types
	}).WithTimeout(2*time.Second).ShouldNot(ContainElement(kubevirtv1.VirtualMachineRestartRequired), "template labels restart nothing")
	g.Expect(infraGet(t, w.Env.Client, tc.ns, vm.Name, vmi)).To(Succeed())
	g.Expect(vmi.UID).To(Equal(instance), "the same instance, never restarted")
	g.Expect(vmi.Annotations).To(HaveKeyWithValue(infrav1.OwnerAnnotation, tc.ns+"/community-0"), "the instance's events reach the machine")
	g.Expect(vmi.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineNamespaceLabel, tc.ns), "the running instance carries the identity labels")
	launchers := &corev1.PodList{}
	g.Expect(w.Env.Client.List(ctx, launchers, client.InNamespace(tc.ns), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})).To(Succeed())
	g.Expect(launchers.Items).NotTo(BeEmpty())
	for _, pod := range launchers.Items {
		g.Expect(pod.Labels).To(HaveKeyWithValue(infrav1.KubevirtMachineNamespaceLabel, tc.ns),
			"its launcher pod is selected by the cluster's NetworkPolicies")
	}
	userData := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, secret.Name, userData)).To(Succeed())
	g.Expect(userData.OwnerReferences).To(ContainElement(HaveField("UID", vm.UID)), "the user data Secret goes with the VM")

	// A VM with the community marks that the policy refuses (a service
	// account token in the guest) is not adopted: the provider would act
	// on it with its own rights.
	forged, _ := fixture.CommunityMachine(tc.ns, "forged-0", fixture.ClusterName, "forged-0", false, nil)
	forged.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
	forged.Spec.Template.Spec.Domain.Devices.Disks = append(forged.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "token"})
	forged.Spec.Template.Spec.Volumes = append(forged.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: "token",
		VolumeSource: kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "default"}}})
	g.Expect(w.Env.Client.Create(ctx, forged)).To(Succeed())
	refused := tc.newMachine(t, fixture.MachineOptions{Name: "forged-0"})
	eventually(t, tc.reason(refused, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.NotAllowedByPolicyReason))
	g.Expect(condition(get(t, tc.c, refused), infrav1.VirtualMachineReadyCondition)).To(ContainSubstring("is not adopted"))

	for _, name := range []string{"stranger-0", "elsewhere-0"} {
		other := tc.newMachine(t, fixture.MachineOptions{Name: name})
		eventually(t, tc.reason(other, infrav1.VirtualMachineReadyCondition)).Should(Equal(infrav1.NameConflictReason))
	}
	for _, name := range []string{"stranger-0", "elsewhere-0", "forged-0"} {
		untouched := &kubevirtv1.VirtualMachine{}
		g.Expect(w.Env.Client.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: name}, untouched)).To(Succeed())
		g.Expect(untouched.Annotations).NotTo(HaveKey(infrav1.OwnerAnnotation), name)
		g.Expect(untouched.OwnerReferences).To(BeEmpty(), name)
	}

	// Deleting the machine takes the adopted VM and its Secret with it.
	g.Expect(tc.c.Delete(ctx, km)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, vm.Name, &kubevirtv1.VirtualMachine{}))
	}).Should(BeTrue(), "the adopted VM is deleted with its machine")
	eventually(t, func() bool {
		return apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, secret.Name, &corev1.Secret{}))
	}).Should(BeTrue(), "the community user data Secret goes with its VM")
}

// TestCommunityServiceAdoptedInPlace runs a KubevirtCluster whose
// control-plane Service the community provider made: the provider adopts
// the same Service and keeps its selector, which still selects the
// control-plane VMs the community provider started (they lack the
// provider's labels until they restart).
func TestCommunityServiceAdoptedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.GenerateName = "tenant-"
	g.Expect(w.Env.Client.Create(ctx, ns)).To(Succeed())
	svc := fixture.CommunityService(ns.Name, fixture.ClusterName)
	g.Expect(w.Env.Client.Create(ctx, svc)).To(Succeed())

	tc := newTenantClusterOn(t, w.Env.Client, fixture.TenantOptions{Namespace: ns.Name, Owned: true})
	eventually(t, func() string {
		return conditions.GetReason(get(t, w.Env.Client, tc.kc), infrav1.ControlPlaneEndpointReadyCondition)
	}).Should(Equal(infrav1.EndpointReadyReason))
	adopted := get(t, w.Env.Client, &corev1.Service{ObjectMeta: svc.ObjectMeta})
	g.Expect(adopted.UID).To(Equal(svc.UID), "the same Service")
	g.Expect(adopted.Annotations).To(HaveKeyWithValue(infrav1.OwnerAnnotation, ns.Name+"/"+fixture.ClusterName))
	g.Expect(adopted.Annotations).To(HaveKeyWithValue(adoption.AdoptedFromAnnotation, adoption.CommunityProvider))
	g.Expect(adopted.Spec.Selector).To(Equal(adoption.CommunitySelector(fixture.ClusterName)),
		"the selector still selects the community provider's control-plane VMs")
	g.Expect(adopted.OwnerReferences).To(ContainElement(HaveField("UID", tc.kc.UID)))

	// One on another port is not adopted: correcting it would move the
	// endpoint the tenant's certificates name.
	other := &corev1.Namespace{}
	other.GenerateName = "tenant-"
	g.Expect(w.Env.Client.Create(ctx, other)).To(Succeed())
	moved := fixture.CommunityService(other.Name, fixture.ClusterName)
	moved.Spec.Ports[0].Port = 7443
	g.Expect(w.Env.Client.Create(ctx, moved)).To(Succeed())
	refused := newTenantClusterOn(t, w.Env.Client, fixture.TenantOptions{Namespace: other.Name, Owned: true})
	eventually(t, func() string {
		return conditions.GetReason(get(t, w.Env.Client, refused.kc), infrav1.ControlPlaneEndpointReadyCondition)
	}).Should(Equal(infrav1.ServiceFailedReason))
	g.Expect(get(t, w.Env.Client, moved).Annotations).NotTo(HaveKey(infrav1.OwnerAnnotation))
}

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// brokenCloudConfig is valid enough for cloud-init to attach but not to
// parse: the guest boots and never finishes bootstrapping.
const brokenCloudConfig = "#cloud-config\nruncmd: [unclosed\n"

func withCheck(strategy string) func(*infrav1.KubevirtMachine) {
	return func(km *infrav1.KubevirtMachine) { km.Spec.BootstrapCheckSpec.CheckStrategy = strategy }
}

func TestCheckNoneTrustsARunningVM(t *testing.T) {
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "none-0", Data: brokenCloudConfig, Mutate: withCheck(infrav1.CheckStrategyNone)})
	// With no check, a running VM counts, even one whose bootstrap failed.
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, km.Name)).Should(HavePrefix("bootstrap-failed"))
}

func TestCheckGuestAgent(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	good := tc.newMachine(t, fixture.MachineOptions{Name: "agent-0", Mutate: withCheck(infrav1.CheckStrategyGuestAgent)})
	bad := tc.newMachine(t, fixture.MachineOptions{Name: "agent-1", Data: brokenCloudConfig, Mutate: withCheck(infrav1.CheckStrategyGuestAgent)})
	eventually(t, tc.provisioned(good)).Should(Succeed())
	g.Expect(conditions.IsTrue(get(t, tc.c, good), infrav1.BootstrapSucceededCondition)).To(BeTrue())

	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, good.Name, vm)).To(Succeed())
	probe := vm.Spec.Template.Spec.ReadinessProbe
	g.Expect(probe).NotTo(BeNil())
	g.Expect(probe.Exec.Command).To(ContainElement(infrav1.BootstrapSentinelFile))

	// The guest whose bootstrap failed runs, but the probe never passes.
	eventually(t, guestOutcome(w.Env.Client, tc.ns, bad.Name)).Should(HavePrefix("bootstrap-failed"))
	eventually(t, tc.reason(bad, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.WaitingForBootstrapReason))
	NewWithT(t).Consistently(tc.provisioned(bad)).WithTimeout(2 * time.Second).ShouldNot(Succeed())
}

// TestUserExecProbeRunsInTheGuest gives two machines a readiness probe of
// their own, which KubeVirt runs in the guest through its agent: the
// guest answers from its command table (docs/simulator.md), so a file the
// user data wrote makes the VM Ready and a program the guest lacks never
// does.
func TestUserExecProbeRunsInTheGuest(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	probed := func(cmd ...string) func(*infrav1.KubevirtMachine) {
		return func(km *infrav1.KubevirtMachine) {
			withCheck(infrav1.CheckStrategyNone)(km)
			km.Spec.VirtualMachineTemplate.Spec.Template.Spec.ReadinessProbe = &kubevirtv1.Probe{
				Handler: kubevirtv1.Handler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1}
		}
	}
	data := "#cloud-config\nwrite_files:\n- path: /etc/capkv-test/healthy\n  content: ok\nruncmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"
	healthy := tc.newMachine(t, fixture.MachineOptions{Name: "probe-0", Data: data, Mutate: probed("cat", "/etc/capkv-test/healthy")})
	lacking := tc.newMachine(t, fixture.MachineOptions{Name: "probe-1", Data: data, Mutate: probed("systemctl", "is-active", "kubelet")})
	eventually(t, tc.provisioned(healthy)).Should(Succeed())

	eventually(t, guestOutcome(w.Env.Client, tc.ns, lacking.Name)).Should(Equal("joined"))
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, lacking.Name, vmi)).To(Succeed())
	g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	g.Consistently(func(g Gomega) {
		g.Expect(infraGet(t, w.Env.Client, tc.ns, lacking.Name, vmi)).To(Succeed())
		for _, c := range vmi.Status.Conditions {
			g.Expect(c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue).To(BeFalse(), "the probe's program is not in the guest")
		}
	}).WithTimeout(3 * time.Second).Should(Succeed())
	g.Expect(tc.provisioned(lacking)()).NotTo(Succeed())
}

func TestCheckSSH(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	good := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-0", Mutate: withCheck(infrav1.CheckStrategySSH)})
	bad := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-1", Data: brokenCloudConfig, Mutate: withCheck(infrav1.CheckStrategySSH)})
	ign := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-2", Format: "ignition", Data: ignitionConfig, Mutate: func(km *infrav1.KubevirtMachine) {
		bootFlatcar(km)
		withCheck(infrav1.CheckStrategySSH)(km)
	}})
	eventually(t, tc.provisioned(good)).Should(Succeed())
	eventually(t, tc.provisioned(ign)).Should(Succeed())
	g.Expect(condition(get(t, tc.c, good), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("verified host key"))

	// The cluster's client key pair lives in a Secret owned by the Cluster.
	keys := &corev1.Secret{}
	g.Expect(w.Env.Client.Get(ctx, keyOf(tc.ns, "tenant-ssh-keys"), keys)).To(Succeed())
	g.Expect(keys.OwnerReferences).To(ConsistOf(HaveField("Kind", "Cluster")))
	// The user's data is kept as the first part of a multipart document.
	secret := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "ssh-0-userdata", secret)).To(Succeed())
	g.Expect(string(secret.Data["userdata"])).To(ContainSubstring(fixture.ValidCloudConfig))
	g.Expect(string(secret.Data["userdata"])).To(ContainSubstring("multipart/mixed"))

	// A guest without the sentinel answers, and the check keeps waiting.
	eventually(t, tc.reason(bad, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.WaitingForBootstrapReason))
	g.Expect(condition(get(t, tc.c, bad), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("does not exist yet"))
}

func TestCheckSSHRefusesAnotherHostKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-mitm", NoBootstrap: true, Mutate: withCheck(infrav1.CheckStrategySSH)})
	// Pretend the provider injected another host key than the guest uses:
	// pre-create the user data Secret the provider will keep, with a host
	// key the guest does not have.
	other := tc.newMachine(t, fixture.MachineOptions{Name: "ssh-other", Mutate: withCheck(infrav1.CheckStrategySSH)})
	eventually(t, tc.provisioned(other)).Should(Succeed())
	otherData := &corev1.Secret{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, "ssh-other-userdata", otherData)).To(Succeed())
	stranger, err := sshcheck.NewKeyPair()
	g.Expect(err).NotTo(HaveOccurred())
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh-mitm-userdata", Namespace: tc.ns,
		Annotations: map[string]string{infrav1.OwnerAnnotation: tc.ns + "/" + km.Name}},
		Data: map[string][]byte{"userdata": otherData.Data["userdata"], "ssh-host-key.pub": []byte(stranger.Public)}}
	g.Expect(w.Env.Client.Create(ctx, mine)).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh-mitm-bootstrap", Namespace: tc.ns},
		Data: map[string][]byte{"value": []byte(fixture.ValidCloudConfig)}})).To(Succeed())
	tc.setBootstrapSecret(t, "ssh-mitm", "ssh-mitm-bootstrap")
	eventually(t, tc.reason(km, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.CheckFailedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("host key"))
	NewWithT(t).Consistently(tc.provisioned(km)).WithTimeout(2 * time.Second).ShouldNot(Succeed())
}

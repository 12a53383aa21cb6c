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
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/sshcheck"
)

// brokenCloudConfig is valid enough for cloud-init to attach but not to
// parse: the guest boots and never finishes bootstrapping.
const brokenCloudConfig = "#cloud-config\nruncmd: [unclosed\n"

func withCheck(strategy string) func(*infrav1.KubevirtMachine) {
	return func(km *infrav1.KubevirtMachine) { km.Spec.BootstrapCheckSpec.CheckStrategy = strategy }
}

func TestCheckNoneTrustsARunningVM(t *testing.T) {
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, machineOptions{name: "none-0", data: brokenCloudConfig, mutate: withCheck(infrav1.CheckStrategyNone)})
	// With no check, a running VM counts, even one whose bootstrap failed.
	eventually(t, tc.provisioned(km)).Should(Succeed())
	eventually(t, guestOutcome(w.Env.Client, tc.ns, km.Name)).Should(HavePrefix("bootstrap-failed"))
}

func TestCheckGuestAgent(t *testing.T) {
	g := NewWithT(t)
	tc := newTenantCluster(t, nil)
	good := tc.newMachine(t, machineOptions{name: "agent-0", mutate: withCheck(infrav1.CheckStrategyGuestAgent)})
	bad := tc.newMachine(t, machineOptions{name: "agent-1", data: brokenCloudConfig, mutate: withCheck(infrav1.CheckStrategyGuestAgent)})
	eventually(t, tc.provisioned(good)).Should(Succeed())
	g.Expect(conditions.IsTrue(get(t, tc.c, good), infrav1.BootstrapSucceededCondition)).To(BeTrue())

	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(infraGet(t, w.Env.Client, tc.ns, good.Name, vm)).To(Succeed())
	probe := vm.Spec.Template.Spec.ReadinessProbe
	g.Expect(probe).NotTo(BeNil())
	g.Expect(probe.Exec.Command).To(ContainElement(infrav1.BootstrapSentinelFile))

	// The guest whose bootstrap failed runs, but the probe never passes.
	eventually(t, guestOutcome(w.Env.Client, tc.ns, bad.Name)).Should(HavePrefix("bootstrap-failed"))
	eventually(t, tc.reason(bad, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.BootstrapCheckPendingReason))
	NewWithT(t).Consistently(tc.provisioned(bad)).WithTimeout(2 * time.Second).ShouldNot(Succeed())
}

func TestCheckSSH(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	good := tc.newMachine(t, machineOptions{name: "ssh-0", mutate: withCheck(infrav1.CheckStrategySSH)})
	bad := tc.newMachine(t, machineOptions{name: "ssh-1", data: brokenCloudConfig, mutate: withCheck(infrav1.CheckStrategySSH)})
	ign := tc.newMachine(t, machineOptions{name: "ssh-2", format: "ignition", data: ignitionConfig, mutate: withCheck(infrav1.CheckStrategySSH)})
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
	g.Expect(string(secret.Data["userdata"])).To(ContainSubstring(validCloudConfig))
	g.Expect(string(secret.Data["userdata"])).To(ContainSubstring("multipart/mixed"))

	// A guest without the sentinel answers, and the check keeps waiting.
	eventually(t, tc.reason(bad, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.BootstrapCheckPendingReason))
	g.Expect(condition(get(t, tc.c, bad), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("does not exist yet"))
}

func TestCheckSSHRefusesAnotherHostKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	km := tc.newMachine(t, machineOptions{name: "ssh-mitm", noBootstrap: true, mutate: withCheck(infrav1.CheckStrategySSH)})
	// Pretend the provider injected another host key than the guest uses:
	// pre-create the user data Secret the provider will keep, with a host
	// key the guest does not have.
	other := tc.newMachine(t, machineOptions{name: "ssh-other", mutate: withCheck(infrav1.CheckStrategySSH)})
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
		Data: map[string][]byte{"value": []byte(validCloudConfig)}})).To(Succeed())
	tc.setBootstrapSecret(t, "ssh-mitm", "ssh-mitm-bootstrap")
	eventually(t, tc.reason(km, infrav1.BootstrapSucceededCondition)).Should(Equal(infrav1.BootstrapCheckFailedReason))
	g.Expect(condition(get(t, tc.c, km), infrav1.BootstrapSucceededCondition)).To(ContainSubstring("host key"))
	NewWithT(t).Consistently(tc.provisioned(km)).WithTimeout(2 * time.Second).ShouldNot(Succeed())
}

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

package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

const (
	name = "capk"
	from = "v1.34.1"
	to   = "v1.35.0"
)

// communityVariables are what a user of the community provider's default
// template sets (it has no defaults): three control-plane machines and two
// workers.
var communityVariables = map[string]string{
	"KUBERNETES_VERSION":          from,
	"CONTROL_PLANE_MACHINE_COUNT": "3",
	"WORKER_MACHINE_COUNT":        "2",
	"NODE_VM_IMAGE_TEMPLATE":      "quay.io/capk/ubuntu-2404-container-disk:" + from,
	"CRI_PATH":                    "/var/run/containerd/containerd.sock",
	"SSH_AUTHORIZED_KEY":          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample user@example",
}

var _ = Describe("switching from the community provider", Ordered, func() {
	ctx := context.Background()
	var ns string
	var before map[string][]string

	BeforeAll(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-switch-"}}
		Expect(mgmt.Client.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		out, err := cc.RunWithVariables(ctx, communityVariables, "generate", "cluster", name, "-n", ns,
			"--from", filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "capk", "cluster-template.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, mgmt.Client, []byte(out))).To(Succeed())
		Expect(world.InstallCNI(ctx, mgmt.Client, ns, name)).To(Succeed())

		By("the community provider builds the cluster: 3 control-plane machines and 2 workers")
		community := world.StartCommunityProvider(mgmt.Client, ns)
		DeferCleanup(community.Stop)
		expectMachinesWithNodes(ctx, ns, 5, community.LastError)
		community.Stop()
		before = infraUIDs(ctx, ns)
		Expect(before).To(HaveKeyWithValue("VirtualMachine", HaveLen(5)))
		Expect(before).To(HaveKeyWithValue("VirtualMachineInstance", HaveLen(5)))
		Expect(before).To(HaveKeyWithValue("Secret", HaveLen(5)))
	})

	It("replaces the community provider with clusterctl delete and init, and adopts every VM in place", func() {
		By("clusterctl upgrade refuses: the two providers' release series are not one line")
		_, err := cc.Run(ctx, "upgrade", "apply", "--infrastructure", clusterctl.CommunityNamespace+"/kubevirt:"+suite.ReleaseVersion,
			"--kubeconfig", mgmt.Kubeconfig)
		Expect(err).To(MatchError(ContainSubstring("version " + suite.ReleaseVersion + " for the provider " +
			clusterctl.CommunityNamespace + "/" + clusterctl.ProviderLabel + " does not match any release series")))

		By("clusterctl delete removes the community provider and keeps its CRDs and every object")
		_, err = cc.Run(ctx, "delete", "--infrastructure", "kubevirt", "--include-namespace", "--kubeconfig", mgmt.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Client.Get(ctx, clusterctl.CommunityDeployment, &appsv1.Deployment{}))
		}).WithTimeout(time.Minute).Should(BeTrue(), func() string {
			d := &appsv1.Deployment{}
			err := mgmt.Client.Get(ctx, clusterctl.CommunityDeployment, d)
			pods := &corev1.PodList{}
			_ = mgmt.Client.List(ctx, pods, client.InNamespace(clusterctl.CommunityNamespace))
			rs := &appsv1.ReplicaSetList{}
			_ = mgmt.Client.List(ctx, rs, client.InNamespace(clusterctl.CommunityNamespace))
			var out []string
			for _, p := range pods.Items {
				out = append(out, fmt.Sprintf("pod %s node %q deleting %v finalizers %v phase %s", p.Name, p.Spec.NodeName, p.DeletionTimestamp, p.Finalizers, p.Status.Phase))
			}
			for _, r := range rs.Items {
				out = append(out, fmt.Sprintf("rs %s deleting %v finalizers %v", r.Name, r.DeletionTimestamp, r.Finalizers))
			}
			return fmt.Sprintf("%v deleting %v finalizers %v labels %v\n%s", err, d.DeletionTimestamp, d.Finalizers, d.Labels, strings.Join(out, "\n"))
		})
		machines := &infrav1.KubevirtMachineList{}
		Expect(mgmt.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(HaveLen(5))

		By("clusterctl init installs this provider over the same CRDs")
		_, runner, err := cc.Init(ctx, mgmt, suite.ReleaseVersion)
		Expect(err).NotTo(HaveOccurred())
		setup.Providers = append(setup.Providers, runner)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "kubevirtmachines.infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1alpha1"}), "one stored version: nothing to migrate")
		Expect(crd.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, clusterctl.ProviderLabel))

		By("every VM is adopted; nothing is recreated and no instance restarts")
		Eventually(func(g Gomega) []string {
			vms := &kubevirtv1.VirtualMachineList{}
			g.Expect(w.Infra.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
			var adopted []string
			for i := range vms.Items {
				if adoption.Adopted(&vms.Items[i]) {
					adopted = append(adopted, vms.Items[i].Name)
				}
			}
			return adopted
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveLen(5), runner.Logs)
		Eventually(func(g Gomega) []string {
			g.Expect(mgmt.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, km := range machines.Items {
				if c := meta.FindStatusCondition(km.Status.Conditions, infrav1.VirtualMachineReadyCondition); c != nil {
					reasons = append(reasons, c.Reason)
				}
				if meta.FindStatusCondition(km.Status.Conditions, "VMProvisioned") != nil {
					reasons = append(reasons, "the community provider's VMProvisioned")
				}
			}
			return reasons
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(SatisfyAll(HaveLen(5), HaveEach(infrav1.AdoptedReason)), providerLogs)
		Eventually(func(g Gomega) []metav1.Condition {
			kc := &infrav1.KubevirtCluster{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kc)).To(Succeed())
			return kc.Status.Conditions
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(SatisfyAll(
			Not(ContainElement(HaveField("Type", "LoadBalancerAvailable"))), HaveEach(HaveField("Reason", Not(BeEmpty())))),
			"the community provider's conditions are gone", providerLogs)
		Eventually(func(g Gomega) []string {
			vmis := &kubevirtv1.VirtualMachineInstanceList{}
			g.Expect(w.Infra.Client.List(ctx, vmis, client.InNamespace(ns), client.HasLabels{infrav1.KubevirtMachineNamespaceLabel})).To(Succeed())
			pods := &corev1.PodList{}
			g.Expect(w.Infra.Client.List(ctx, pods, client.InNamespace(ns), client.HasLabels{infrav1.KubevirtMachineNamespaceLabel})).To(Succeed())
			var labelled []string
			for _, vmi := range vmis.Items {
				labelled = append(labelled, "instance "+vmi.Name)
			}
			for _, pod := range pods.Items {
				labelled = append(labelled, "pod "+pod.Labels[kubevirtv1.CreatedByLabel])
			}
			return labelled
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveLen(10), "every running instance and its launcher pod carry the identity labels")
		Expect(infraUIDs(ctx, ns)).To(Equal(before), "the same VMs, instances, DataVolumes, Services and Secrets")
		expectMachinesWithNodes(ctx, ns, 5, runner.Logs)
	})

	It("scales the workers up and down", func() {
		scaleWorkers(ctx, ns, 3)
		expectMachinesWithNodes(ctx, ns, 6, providerLogs)
		scaleWorkers(ctx, ns, 2)
		expectMachinesWithNodes(ctx, ns, 5, providerLogs)
	})

	It("rolls a Kubernetes upgrade over the control plane, then the workers", func() {
		cpTemplate := copyTemplateForVersion(ctx, ns, name+"-control-plane")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}, kcp); err != nil {
				return err
			}
			kcp.Spec.Version = to
			kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = cpTemplate
			return mgmt.Client.Update(ctx, kcp)
		})).To(Succeed())
		expectVersion(ctx, ns, to, 3, true)
		mdTemplate := copyTemplateForVersion(ctx, ns, name+"-md-0")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			md := &clusterv1.MachineDeployment{}
			if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-md-0"}, md); err != nil {
				return err
			}
			md.Spec.Template.Spec.Version = to
			md.Spec.Template.Spec.InfrastructureRef.Name = mdTemplate
			// Both workers at once, as a team with room for them rolls.
			md.Spec.Rollout.Strategy.Type = clusterv1.RollingUpdateMachineDeploymentStrategyType
			md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
			return mgmt.Client.Update(ctx, md)
		})).To(Succeed())
		expectVersion(ctx, ns, to, 2, false)
		expectMachinesWithNodes(ctx, ns, 5, providerLogs)
	})

	It("deletes the cluster and leaves nothing behind", func() {
		Expect(mgmt.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		Eventually(func() map[string][]string { return infraUIDs(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(BeEmpty(), providerLogs)
		Eventually(func(g Gomega) int {
			machines := &infrav1.KubevirtMachineList{}
			g.Expect(mgmt.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			clusters := &infrav1.KubevirtClusterList{}
			g.Expect(mgmt.Client.List(ctx, clusters, client.InNamespace(ns))).To(Succeed())
			return len(machines.Items) + len(clusters.Items)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero())
	})
})

// providerLogs are the provider's log and the state of the KubevirtMachines
// of the namespaces, for a failure message.
func providerLogs() string {
	ctx := context.Background()
	var out []string
	machines := &infrav1.KubevirtMachineList{}
	_ = mgmt.Client.List(ctx, machines)
	for _, km := range machines.Items {
		line := km.Namespace + "/" + km.Name + ":"
		for _, c := range km.Status.Conditions {
			line += fmt.Sprintf(" %s=%s %s %q;", c.Type, c.Status, c.Reason, c.Message)
		}
		out = append(out, line)
	}
	return setup.Providers[len(setup.Providers)-1].Logs() + "\n" + strings.Join(out, "\n")
}

// infraUIDs are the UIDs of the tenant's objects on the infra cluster,
// world.TenantUIDs and the user data Secrets, by kind; kinds with none are
// left out.
func infraUIDs(ctx context.Context, ns string) map[string][]string {
	uids, err := world.TenantUIDs(ctx, w.Infra.Client, ns)
	Expect(err).NotTo(HaveOccurred())
	secrets := &corev1.SecretList{}
	Expect(w.Infra.Client.List(ctx, secrets, client.InNamespace(ns))).To(Succeed())
	for _, s := range secrets.Items {
		if strings.HasSuffix(s.Name, "-userdata") {
			uids["Secret"] = append(uids["Secret"], string(s.UID))
		}
	}
	sort.Strings(uids["Secret"])
	for kind, list := range uids {
		if len(list) == 0 {
			delete(uids, kind)
		}
	}
	return uids
}

// expectMachinesWithNodes waits for n Machines, each with a Node.
func expectMachinesWithNodes(ctx context.Context, ns string, n int, logs func() string) {
	Eventually(func() (string, error) { return world.MachinesWithNodes(ctx, mgmt.Client, ns) }).
		WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, %d with a Node", n, n)), logs)
}

// expectVersion waits until the control plane's (or the workers') n
// Machines all run version with a Node, and no other one is left.
func expectVersion(ctx context.Context, ns, version string, n int, controlPlane bool) {
	Eventually(func(g Gomega) []string {
		machines := &clusterv1.MachineList{}
		g.Expect(mgmt.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		var versions []string
		for _, m := range machines.Items {
			if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp != controlPlane {
				continue
			}
			v := m.Spec.Version
			if m.Status.NodeInfo == nil || !m.Status.NodeRef.IsDefined() {
				v += " without a Node"
			} else if m.Status.NodeInfo.KubeletVersion != version {
				v += " kubelet " + m.Status.NodeInfo.KubeletVersion
			}
			versions = append(versions, v)
		}
		return versions
	}).WithTimeout(timeout).WithPolling(time.Second).Should(SatisfyAll(HaveLen(n), HaveEach(version)), providerLogs)
}

func scaleWorkers(ctx context.Context, ns string, replicas int32) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		md := &clusterv1.MachineDeployment{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-md-0"}, md); err != nil {
			return err
		}
		md.Spec.Replicas = ptr.To(replicas)
		return mgmt.Client.Update(ctx, md)
	})).To(Succeed())
}

// copyTemplateForVersion copies a KubevirtMachineTemplate of the community
// manifests with its container disk image tagged to instead of from, as
// their user upgrading does (templates are immutable), and returns its
// name.
func copyTemplateForVersion(ctx context.Context, ns, template string) string {
	tmpl := &infrav1.KubevirtMachineTemplate{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: template}, tmpl)).To(Succeed())
	next := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: template + "-" + strings.ReplaceAll(to, ".", "-")},
		Spec: *tmpl.Spec.DeepCopy()}
	vm := next.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template
	Expect(vm).NotTo(BeNil())
	var tagged bool
	for i := range vm.Spec.Volumes {
		if disk := vm.Spec.Volumes[i].ContainerDisk; disk != nil && strings.HasSuffix(disk.Image, ":"+from) {
			disk.Image, tagged = strings.TrimSuffix(disk.Image, from)+to, true
		}
	}
	Expect(tagged).To(BeTrue(), "the template's container disk is tagged with the version")
	Expect(mgmt.Client.Create(ctx, next)).To(Succeed())
	return next.Name
}

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

// Helpers that specs of several files use; a helper of one spec file stays
// in that file.

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// newNamespace creates a namespace named after prefix.
func newNamespace(ctx context.Context, prefix string) string {
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(c.Create(ctx, namespace)).To(Succeed())
	return namespace.Name
}

// applyGenerated runs clusterctl with args in namespace ns (its generate
// cluster, as a user would) and applies what it prints there; it returns
// the output.
func applyGenerated(ctx context.Context, ns string, vars map[string]string, args ...string) string {
	out, err := cc.RunWithVariables(ctx, vars, slices.Concat(args, []string{"-n", ns})...)
	Expect(err).NotTo(HaveOccurred(), "clusterctl %v", args)
	Expect(world.ApplyYAML(ctx, c, []byte(out))).To(Succeed(), "applying the output of clusterctl %v", args)
	return out
}

// expectRunning waits until the Cluster is provisioned and available, with
// every control-plane machine ready.
func expectRunning(ctx context.Context, ns, name string) {
	Eventually(func() string {
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("phase %s, available %t", cluster.Status.Phase, conditions.IsTrue(cluster, clusterv1.AvailableCondition))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("phase Provisioned, available true"), func() string { return describe(ctx, ns) })
}

// deleteCluster deletes a Cluster and waits until it and its infrastructure
// are gone (what the reaper waits for, reaper_test.go).
func deleteCluster(ctx context.Context, ns, name string) {
	Expect(c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	Eventually(func() string { return leftIn(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
		Should(BeEmpty(), func() string { return describe(ctx, ns) })
}

// describe summarizes the cluster's objects for failure messages.
func describe(ctx context.Context, ns string) string {
	var b strings.Builder
	kcs := &infrav1.KubevirtClusterList{}
	_ = c.List(ctx, kcs, client.InNamespace(ns))
	for _, kc := range kcs.Items {
		for _, cond := range kc.Status.Conditions {
			fmt.Fprintf(&b, "KubevirtCluster %s %s=%s %s: %s\n", kc.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		fmt.Fprintf(&b, "  endpoint %s:%d\n", kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port)
	}
	kms := &infrav1.KubevirtMachineList{}
	_ = c.List(ctx, kms, client.InNamespace(ns))
	for _, km := range kms.Items {
		writeNotTrue(&b, "KubevirtMachine", km.Name, km.Status.Conditions)
	}
	pools := &infrav1.KubevirtMachinePoolList{}
	_ = c.List(ctx, pools, client.InNamespace(ns))
	for _, p := range pools.Items {
		writeNotTrue(&b, "KubevirtMachinePool", p.Name, p.Status.Conditions)
	}
	mps := &clusterv1.MachinePoolList{}
	_ = c.List(ctx, mps, client.InNamespace(ns))
	for _, mp := range mps.Items {
		writeNotTrue(&b, "MachinePool", mp.Name, mp.Status.Conditions)
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	_ = c.List(ctx, vmis, client.InNamespace(ns))
	for _, vmi := range vmis.Items {
		fmt.Fprintf(&b, "VMI %s phase %s guest %q\n", vmi.Name, vmi.Status.Phase, vmi.Annotations["sim.capkv.io/guest"])
	}
	for _, km := range kms.Items {
		fmt.Fprintf(&b, "KubevirtMachine %s nodeupdated %v providerID %v\n", km.Name, km.Status.NodeUpdated, ptr.Deref(km.Spec.ProviderID, ""))
	}
	if wc, host, err := tenantClient(ctx, ns, "demo"); err != nil {
		fmt.Fprintf(&b, "workload client: %v\n", err)
	} else {
		nodes := &corev1.NodeList{}
		err := wc.List(ctx, nodes)
		fmt.Fprintf(&b, "workload cluster at %s: %d nodes, %v\n", host, len(nodes.Items), err)
	}
	machines := &clusterv1.MachineList{}
	_ = c.List(ctx, machines, client.InNamespace(ns))
	for _, m := range machines.Items {
		fmt.Fprintf(&b, "Machine %s phase %s nodeRef %v\n", m.Name, m.Status.Phase, m.Status.NodeRef.Name)
		if d := conditions.Get(&m, clusterv1.MachineDeletingCondition); d != nil && d.Status == metav1.ConditionTrue {
			fmt.Fprintf(&b, "  deleting: %s: %s\n", d.Reason, d.Message)
		}
	}
	if provider != nil {
		fmt.Fprintf(&b, "provider pods (restarts, state, last 20 log lines of each):\n%s\n", provider.LogTails(20))
	}
	return b.String()
}

// writeNotTrue writes the conditions of an object that are not True.
func writeNotTrue(b *strings.Builder, kind, name string, conds []metav1.Condition) {
	for _, cond := range conds {
		if cond.Status != metav1.ConditionTrue {
			fmt.Fprintf(b, "%s %s %s=%s %s: %s\n", kind, name, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
}

// tenantClient reaches a tenant cluster with the kubeconfig Cluster API
// wrote for it, as its users do; it also returns the server's address.
func tenantClient(ctx context.Context, ns, cluster string) (client.Client, string, error) {
	return world.TenantClient(ctx, c, ns, cluster)
}

// servingCertInjected checks that cert-manager issued the provider's
// serving certificate and that its cainjector injected the CA into every
// webhook of the provider. Both happen after the Secret is written, on
// cert-manager's own time: clusterctl init waits for neither, so a
// webhook call right after it may fail on an unknown authority.
func servingCertInjected(ctx context.Context) func(g Gomega) {
	return func(g Gomega) {
		cert := &unstructured.Unstructured{}
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: clusterctl.Namespace, Name: "capkv-serving-cert"}, cert)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(SatisfyAll(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("status", "True"))))
		secret := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: clusterctl.Namespace, Name: "webhook-service-cert"}, secret)).To(Succeed())
		g.Expect(secret.Data["ca.crt"]).NotTo(BeEmpty())
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "capkv-validating-webhook-configuration"}, validating)).To(Succeed())
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "capkv-mutating-webhook-configuration"}, mutating)).To(Succeed())
		for _, hook := range validating.Webhooks {
			g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]), "cainjector injects the CA into %s", hook.Name)
		}
		for _, hook := range mutating.Webhooks {
			g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]), "cainjector injects the CA into %s", hook.Name)
		}
	}
}

// kubevirtClusterOf reads the KubevirtCluster of a Cluster, whose name the
// topology controller generates for a ClusterClass cluster.
func kubevirtClusterOf(ctx context.Context, ns, name string) *infrav1.KubevirtCluster {
	cluster := &clusterv1.Cluster{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	kc := &infrav1.KubevirtCluster{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.InfrastructureRef.Name}, kc)).To(Succeed())
	return kc
}

// kubevirtMachines lists the namespace's KubevirtMachines.
func kubevirtMachines(ctx context.Context, ns string) []infrav1.KubevirtMachine {
	kms := &infrav1.KubevirtMachineList{}
	Expect(c.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
	return kms.Items
}

// expectMachinesWithNodes waits for n Machines of the namespace, each with
// a Node.
func expectMachinesWithNodes(ctx context.Context, ns string, n int) {
	Eventually(func() (string, error) { return world.MachinesWithNodes(ctx, c, ns) }).
		WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, %d with a Node", n, n)), func() string { return describe(ctx, ns) })
}

// expectDeploymentNodes waits for exactly n machines of a
// MachineDeployment, all with Nodes.
func expectDeploymentNodes(ctx context.Context, ns, md string, n int) {
	Eventually(func() string {
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
			return err.Error()
		}
		withNode := 0
		for _, m := range machines.Items {
			if m.Status.NodeRef.IsDefined() && m.DeletionTimestamp.IsZero() {
				withNode++
			}
		}
		return fmt.Sprintf("%d machines, %d with a Node", len(machines.Items), withNode)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, %d with a Node", n, n)),
		func() string { return describe(ctx, ns) })
}

// scaleDeployment sets the replicas of a MachineDeployment.
func scaleDeployment(ctx context.Context, ns, name string, n int32) {
	Expect(retryWrite(func() error {
		md := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
			return err
		}
		md.Spec.Replicas = ptr.To(n)
		return c.Update(ctx, md)
	})).To(Succeed())
}

// machineUIDs are the UIDs of the namespace's Machines.
func machineUIDs(ctx context.Context, ns string) map[types.UID]bool {
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
	out := map[types.UID]bool{}
	for _, m := range machines.Items {
		out[m.UID] = true
	}
	return out
}

// expectAllReplaced waits until n Machines have Nodes and none of them is
// one of before.
func expectAllReplaced(ctx context.Context, ns string, before map[types.UID]bool, n int) {
	Eventually(func(g Gomega) string {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		old, withNode := 0, 0
		for _, m := range machines.Items {
			if before[m.UID] {
				old++
			}
			if m.Status.NodeRef.IsDefined() {
				withNode++
			}
		}
		return fmt.Sprintf("%d machines, %d old, %d with a Node", len(machines.Items), old, withNode)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, 0 old, %d with a Node", n, n)),
		func() string { return describe(ctx, ns) })
}

// updateTopology changes a Cluster's topology as a user would.
func updateTopology(ctx context.Context, ns, name string, change func(*clusterv1.Topology)) {
	Expect(retryWrite(func() error {
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
			return err
		}
		change(&cluster.Spec.Topology)
		return c.Update(ctx, cluster)
	})).To(Succeed())
}

// expectControlPlaneUpgraded waits until every control-plane machine runs
// version with a Node, and fails if a worker got the version first.
func expectControlPlaneUpgraded(ctx context.Context, ns, version string) {
	var workerFirst string
	Eventually(func(g Gomega) bool {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		upgraded, newWorker := true, ""
		for _, m := range machines.Items {
			if !m.DeletionTimestamp.IsZero() {
				continue
			}
			_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
			if cp && (m.Spec.Version != version || !m.Status.NodeRef.IsDefined()) {
				upgraded = false
			}
			if !cp && m.Spec.Version == version {
				newWorker = m.Name
			}
		}
		if newWorker != "" && !upgraded && workerFirst == "" {
			workerFirst = newWorker
		}
		return upgraded
	}).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(BeTrue(), func() string { return describe(ctx, ns) })
	Expect(workerFirst).To(BeEmpty(), "no worker takes the new version before the control plane runs it")
}

// expectKubelets checks that every Machine's Node reports the kubelet
// version, as the guest's image or install gave it.
func expectKubelets(ctx context.Context, ns, version string) {
	Eventually(func(g Gomega) map[string]string {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		out := map[string]string{}
		for _, m := range machines.Items {
			if m.Status.NodeInfo == nil {
				out[m.Name] = "no Node info"
				continue
			}
			out[m.Name] = m.Status.NodeInfo.KubeletVersion
		}
		return out
	}).WithTimeout(timeout).WithPolling(time.Second).Should(HaveEach(version))
}

// goldenVolumes counts the golden image DataVolumes in a namespace.
func goldenVolumes(ctx context.Context, ns string) int {
	return len(goldenVolumeNames(ctx, ns))
}

// goldenDataVolumes are the golden image DataVolumes of a namespace.
func goldenDataVolumes(ctx context.Context, ns string) []cdiv1.DataVolume {
	dvs := &cdiv1.DataVolumeList{}
	Expect(c.List(ctx, dvs, client.InNamespace(ns), client.HasLabels{goldenplan.Label})).To(Succeed())
	return dvs.Items
}

// goldenVolumeNames names the golden image DataVolumes in a namespace.
func goldenVolumeNames(ctx context.Context, ns string) []string {
	var names []string
	for _, dv := range goldenDataVolumes(ctx, ns) {
		names = append(names, dv.Name)
	}
	return names
}

// goldenImageURLs are the registry URLs the golden image DataVolumes of a
// namespace import.
func goldenImageURLs(ctx context.Context, ns string) []string {
	var urls []string
	for _, dv := range goldenDataVolumes(ctx, ns) {
		if dv.Spec.Source == nil || dv.Spec.Source.Registry == nil || dv.Spec.Source.Registry.URL == nil {
			urls = append(urls, dv.Name+" imports from no registry")
			continue
		}
		urls = append(urls, *dv.Spec.Source.Registry.URL)
	}
	return urls
}

// patchHealthCheck changes a MachineHealthCheck of the cluster.
func patchHealthCheck(ctx context.Context, ns, name string, mutate func(*clusterv1.MachineHealthCheck)) {
	Expect(retryWrite(func() error {
		mhc := &clusterv1.MachineHealthCheck{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mhc); err != nil {
			return err
		}
		mutate(mhc)
		return c.Update(ctx, mhc)
	})).To(Succeed())
}

// expectCNIApplied checks that the flavor's ClusterResourceSet applied the
// CNI to the cluster and that every Machine's Node is Ready.
func expectCNIApplied(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		binding := &addonsv1.ClusterResourceSetBinding{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, binding)).To(Succeed())
		g.Expect(binding.Spec.Bindings).To(ContainElement(SatisfyAll(
			HaveField("ClusterResourceSetName", name+"-cni-flannel"),
			HaveField("Resources", ContainElement(HaveField("Applied", HaveValue(BeTrue())))))))
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(machines.Items).NotTo(BeEmpty())
		for _, m := range machines.Items {
			g.Expect(conditions.IsTrue(&m, clusterv1.MachineNodeReadyCondition)).To(BeTrue(), "machine %s", m.Name)
		}
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) })
}

// retryWrite runs a read-modify-write of the management cluster again when
// it lost a race (a conflict) or the API server failed for a moment (an
// etcd timeout on a loaded machine), as kubectl and controllers retry: the
// specs check the provider, not the management cluster's availability.
func retryWrite(fn func() error) error {
	backoff := wait.Backoff{Steps: 10, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second}
	return retry.OnError(backoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) ||
			apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
	}, fn)
}

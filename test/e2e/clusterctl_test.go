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

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("clusterctl init", func() {
	BeforeEach(func() {
		if w == nil {
			Skip("installed by the sandbox world's clusterctl; a real cluster has its own install")
		}
	})
	ctx := context.Background()

	It("installs only this provider, with a serving certificate cert-manager issued and injected", func() {
		Expect(initOutput).To(ContainSubstring(`Installing provider="infrastructure-kubevirt" version="` + suite.ReleaseVersion + `" targetNamespace="capkv-system"`))
		Expect(initOutput).NotTo(MatchRegexp(`Installing provider="(cluster-api|bootstrap-kubeadm|control-plane-kubeadm)"`))

		deployment := &appsv1.Deployment{}
		Expect(c.Get(ctx, clusterctl.Deployment, deployment)).To(Succeed())
		Expect(deploymentAvailable(deployment)).To(BeTrue(), "clusterctl init --wait-providers returned before the Deployment was available")

		Eventually(servingCertInjected(ctx)).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		// The pod runs the released image's own binary, unpacked from
		// out/image, as the user the Deployment and the image name: a
		// broken image fails here, and the suite with it.
		Expect(deployment.Spec.Template.Spec.Containers[0].Image).To(MatchRegexp(`@sha256:[0-9a-f]{64}$`), "make release pins the image by digest")
		processes, err := provider.Processes()
		Expect(err).NotTo(HaveOccurred())
		Expect(processes).NotTo(BeEmpty())
		for _, p := range processes {
			Expect(p.Executable).To(SatisfyAll(ContainSubstring("/images/"), HaveSuffix("/manager")), "pod %s runs the image's /manager, not bin/manager", p.Pod)
			Expect([]string{p.UID, p.GID}).To(Equal([]string{"65532", "65532"}), "pod %s runs as the image's non-root user", p.Pod)
		}

		inventory := &unstructured.UnstructuredList{}
		inventory.SetAPIVersion("clusterctl.cluster.x-k8s.io/v1alpha3")
		inventory.SetKind("ProviderList")
		Expect(c.List(ctx, inventory, client.InNamespace(clusterctl.Namespace))).To(Succeed())
		Expect(inventory.Items).To(HaveLen(1))
		Expect(inventory.Items[0].Object).To(SatisfyAll(HaveKeyWithValue("providerName", "kubevirt"),
			HaveKeyWithValue("type", "InfrastructureProvider"), HaveKeyWithValue("version", suite.ReleaseVersion)))
	})

	It("runs the provider as its ServiceAccount: what the installed RBAC does not grant is refused", func() {
		deployment := &appsv1.Deployment{}
		Expect(c.Get(ctx, clusterctl.Deployment, deployment)).To(Succeed())
		Expect(deployment.Spec.Template.Spec.ServiceAccountName).To(Equal(clusterctl.ServiceAccount))
		cfg := rest.CopyConfig(w.Env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + clusterctl.Namespace + ":" + clusterctl.ServiceAccount,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + clusterctl.Namespace, "system:authenticated"},
		}
		asProvider, err := client.New(cfg, client.Options{Scheme: testenv.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(asProvider.List(ctx, &infrav1.KubevirtMachineList{})).To(Succeed(), "the installed RBAC grants the provider its own kinds")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: clusterctl.Namespace, Name: "not-allowed"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		err = asProvider.Create(ctx, pod)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		err = asProvider.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterctl.Namespace}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	})
})

// The clusters of this container are independent, and each mostly waits on
// the world's controllers: BeforeAll applies them all at once and each spec
// then checks its own, so that they come up side by side instead of one
// after another. ContinueOnFailure keeps one failed cluster from skipping
// the checks of the others.
var _ = Describe("clusterctl generate cluster", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	// namespaces holds the namespace of each cluster BeforeAll applied, by
	// flavor ("clusterip" for the ClusterIP cluster).
	namespaces := map[string]string{}
	// The ClusterIP cluster's tenant has an administrator's grant: an
	// identity that places its VMs and Service in infraNS.
	var infraNS, identity string
	// The GPU cluster's other tenant holds one of the device nodes' GPUs
	// with this VM (gpu_test.go).
	var otherGPUVM *kubevirtv1.VirtualMachine
	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		namespaces["nolb"] = applyWithoutLoadBalancer(ctx)
		for _, flavor := range runnableFlavors() {
			ns := newNamespace(ctx, "e2e-flavor-")
			prepareFlavor(ctx, flavor, ns)
			args := []string{"generate", "cluster", "defaults", "--infrastructure", "kubevirt:" + suite.ReleaseVersion}
			if flavor != "default" {
				args = append(args, "--flavor", flavor)
			}
			applyGenerated(ctx, ns, nil, args...)
			namespaces[flavor] = ns
		}
		ns := newNamespace(ctx, "e2e-clusterip-")
		infraNS = newNamespace(ctx, "e2e-infra-")
		identity = grantInfraNamespace(ctx, ns, infraNS)
		out, err := cc.RunWithVariables(ctx, map[string]string{"CAPKV_CONTROL_PLANE_SERVICE_TYPE": "ClusterIP"},
			"generate", "cluster", "cip", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "--worker-machine-count", "1", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("type: ClusterIP"))
		Expect(world.ApplyYAMLWith(ctx, c, []byte(out), withIdentity(identity, false))).To(Succeed())
		namespaces["clusterip"] = ns
		// Last: it waits for the other tenant's VM to take its GPU first.
		namespaces["gpu"], otherGPUVM = applyGPUCluster(ctx)
	})

	It("lists, for every flavor, only variables docs/flavors.md documents, with the same defaults", func() {
		documented := documentedVariables()
		seen := map[string]bool{}
		for _, flavor := range flavors() {
			args := []string{"generate", "cluster", "listed", "--infrastructure", "kubevirt:" + suite.ReleaseVersion, "-n", "default", "--list-variables"}
			if flavor != "default" {
				args = append(args, "--flavor", flavor)
			}
			out, err := cc.Run(ctx, args...)
			Expect(err).NotTo(HaveOccurred())
			for name, def := range listedVariables(out) {
				seen[name] = true
				Expect(documented).To(HaveKey(name), "flavor %s", flavor)
				if documented[name] != "" {
					Expect(def).To(Equal(documented[name]), "the default of %s in flavor %s", name, flavor)
				}
			}
		}
		Expect(keys(documented)).To(ConsistOf(keys(seen)), "every documented variable is in some flavor")
	})

	for _, flavor := range runnableFlavors() {
		It(fmt.Sprintf("renders the %s flavor with only its defaults, and the cluster reaches Running", flavor), func() {
			ns := namespaces[flavor]
			expectRunning(ctx, ns, "defaults")
			kc, kms := expectRunningDescribed(ctx, ns, "defaults")
			Expect(kms).To(HaveLen(1))
			checkFlavor(ctx, flavor, kc, &kms[0])
			deleteClusterLater(ctx, ns, "defaults")
		})
	}

	It("falls back, on an infra namespace no load balancer serves, to the control-plane Service's cluster IP and reaches Running with defaults alone", func() {
		expectLoadBalancerFallback(ctx, namespaces["nolb"])
	})

	It("runs the gpu flavor's workers on the device nodes; one more waits for a freed GPU, and a rollout needs none to spare", func() {
		expectGPUWorkers(ctx, namespaces["gpu"], otherGPUVM)
	})

	It("renders a cluster whose control-plane endpoint is a ClusterIP Service, which reaches Running in the infra namespace its identity grants", func() {
		ns := namespaces["clusterip"]
		expectRunning(ctx, ns, "cip")
		kc := &infrav1.KubevirtCluster{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cip"}, kc)).To(Succeed())
		svc := &corev1.Service{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: infraNS, Name: "cip-lb"}, svc)).To(Succeed())
		Expect(kc.Spec.ControlPlaneEndpoint.Host).To(Equal(svc.Spec.ClusterIP), "the endpoint is the Service's ClusterIP")
		for _, where := range []struct {
			ns   string
			want int
		}{{infraNS, 2}, {ns, 0}} {
			vms := &kubevirtv1.VirtualMachineList{}
			Expect(c.List(ctx, vms, client.InNamespace(where.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "cip"})).To(Succeed())
			Expect(vms.Items).To(HaveLen(where.want), "VMs of the cluster in namespace %s", where.ns)
		}

		By("a second tenant naming the same identity is refused at admission, and nothing of its cluster is created")
		other := newNamespace(ctx, "e2e-other-tenant-")
		out, err := cc.Run(ctx, "generate", "cluster", "cip", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", other)
		Expect(err).NotTo(HaveOccurred())
		err = world.ApplyYAMLWith(ctx, c, []byte(out), withIdentity(identity, true))
		Expect(err).To(MatchError(ContainSubstring("multi-tenancy rule identity-namespace-not-allowed")))
		kcs := &infrav1.KubevirtClusterList{}
		Expect(c.List(ctx, kcs, client.InNamespace(other))).To(Succeed())
		Expect(kcs.Items).To(BeEmpty())

		deleteCluster(ctx, ns, "cip")
		vms := &kubevirtv1.VirtualMachineList{}
		Expect(c.List(ctx, vms, client.InNamespace(infraNS))).To(Succeed())
		Expect(vms.Items).To(BeEmpty(), "the cluster's VMs in the infra namespace are gone with it")
	})
})

// BeforeAll applies the two clusters with a bad image at once, as the
// flavors' container does (above).
var _ = Describe("clusterctl describe", Ordered, ContinueOnFailure, func() {
	const stock = "docker://quay.io/containerdisks/ubuntu:24.04"
	ctx := context.Background()
	var badNS, stockNS string
	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		badNS = newNamespace(ctx, "e2e-bad-image-")
		applyGenerated(ctx, badNS, map[string]string{"CAPKV_NODE_IMAGE": "docker://images.example.com/" + sim.FailBadImage + ":v1.34.1"},
			"generate", "cluster", "bad", "--infrastructure", "kubevirt:"+suite.ReleaseVersion)
		stockNS = newNamespace(ctx, "e2e-stock-image-")
		applyGenerated(ctx, stockNS, map[string]string{"CAPKV_NODE_IMAGE": stock},
			"generate", "cluster", "stock", "--infrastructure", "kubevirt:"+suite.ReleaseVersion)
	})

	It("shows why a cluster waits for an unreachable infra cluster, on its KubevirtCluster", func() {
		ns := newNamespace(ctx, "e2e-unreachable-")
		Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"},
			Data: map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: []byte(fixture.UnreachableKubeconfig)}})).To(Succeed())
		kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "far"},
			Spec: infrav1.KubevirtClusterSpec{InfraClusterSecretRef: &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Name: "gone"}}}
		Expect(c.Create(ctx, kc)).To(Succeed())
		Expect(c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "far"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtCluster", Name: "far"}}})).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
			cond := meta.FindStatusCondition(kc.Status.Conditions, infrav1.InfraClusterAvailableCondition)
			if cond == nil {
				return ""
			}
			return cond.Reason
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(infrav1.InfraClusterUnreachableReason))
		out, err := cc.Run(ctx, "describe", "cluster", "far", "-n", ns, "--kubeconfig", mgmt.Kubeconfig, "--show-conditions", "all")
		Expect(err).NotTo(HaveOccurred())
		rows := expectDescribed(out, "KubevirtCluster "+ns+"/far", kc.Status.Conditions, infrav1.InfraClusterAvailableCondition)
		Expect(strings.Join(rows, "\n")).To(ContainSubstring("127.0.0.1:1"), "the message names the address that does not answer")
		// Its deletion waits for the infra cluster, where its objects may
		// be; once the Secret names one that answers, it completes.
		reachable, err := os.ReadFile(mgmt.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, secret)).To(Succeed())
		secret.Data[infrav1.InfraClusterSecretKubeconfigKey] = reachable
		Expect(c.Update(ctx, secret)).To(Succeed())
		deleteCluster(ctx, ns, "far")
	})

	It("shows why a cluster waits for a bad image, on its KubevirtCluster, and creates no machine", func() {
		ns := badNS
		kc := &infrav1.KubevirtCluster{}
		Eventually(func(g Gomega) string {
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad"}, kc)).To(Succeed())
			return conditions.GetMessage(kc, infrav1.ControlPlaneImageReadyCondition)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(ContainSubstring("unknown image format"))
		Expect(conditions.GetReason(kc, infrav1.ControlPlaneImageReadyCondition)).To(Equal(infrav1.WaitingForGoldenImageReason))
		out, err := cc.Run(ctx, "describe", "cluster", "bad", "-n", ns, "--kubeconfig", mgmt.Kubeconfig, "--show-conditions", "all", "--echo")
		Expect(err).NotTo(HaveOccurred())
		expectDescribed(out, "KubevirtCluster "+ns+"/bad", kc.Status.Conditions, infrav1.ControlPlaneImageReadyCondition)
		controlPlane := &clusterv1.MachineList{}
		Expect(c.List(ctx, controlPlane, client.InNamespace(ns), client.HasLabels{clusterv1.MachineControlPlaneLabel})).To(Succeed())
		Expect(controlPlane.Items).To(BeEmpty(), "no control-plane machine is created while its image cannot be imported")
		deleteClusterLater(ctx, ns, "bad")
	})

	It("shows why a stock cloud image without Kubernetes never joins", func() {
		ns := stockNS
		km := &infrav1.KubevirtMachine{}
		Eventually(firstMachine(ctx, ns, km, func() string { return conditions.GetReason(km, infrav1.NodeJoinedCondition) })).
			WithTimeout(timeout).WithPolling(time.Second).Should(Equal(infrav1.NodeNotJoinedReason), func() string { return describe(ctx, ns) })
		Expect(conditions.GetMessage(km, infrav1.NodeJoinedCondition)).To(SatisfyAll(ContainSubstring(stock), ContainSubstring("v1.34.1"),
			ContainSubstring("docs/images.md")), "the message names the image and the version it must carry")
		vmi := &kubevirtv1.VirtualMachineInstance{}
		Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vmi)).To(Succeed())
		Expect(vmi.Annotations[sim.GuestAnnotation]).To(ContainSubstring("kubeadm: command not found"), "the guest booted and kubeadm was not there")
		machines := &clusterv1.MachineList{}
		Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		Expect(machines.Items).To(HaveLen(1))
		Expect(machines.Items[0].Status.NodeRef.IsDefined()).To(BeFalse(), "no Node ever joined")
		out, err := cc.Run(ctx, "describe", "cluster", "stock", "-n", ns, "--kubeconfig", mgmt.Kubeconfig, "--show-conditions", "all", "--echo")
		Expect(err).NotTo(HaveOccurred())
		expectDescribed(out, "KubevirtMachine "+ns+"/"+km.Name, km.Status.Conditions, infrav1.NodeJoinedCondition)
		deleteClusterLater(ctx, ns, "stock")
	})
})

// firstMachine reads the namespace's first KubevirtMachine into km and
// returns what read says of it, "" while there is none.
func firstMachine(ctx context.Context, ns string, km *infrav1.KubevirtMachine, read func() string) func() string {
	return func() string {
		kms := &infrav1.KubevirtMachineList{}
		Expect(c.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
		if len(kms.Items) == 0 {
			return ""
		}
		*km = kms.Items[0]
		return read()
	}
}

// describedObject is a tree line naming an object; an object named in a
// condition's message, further right, is not one.
var describedObject = regexp.MustCompile(`^[\s│├└─]*[A-Z][A-Za-z]+ [a-z0-9-]+/[a-z0-9.-]+`)

// expectDescribed checks that clusterctl describe printed each of the
// object's conditions of the given types, with the reason it has and the
// start of its message, in the rows under the object's own line. It
// returns those rows.
func expectDescribed(out, object string, conds []metav1.Condition, types ...string) []string {
	lines := strings.Split(out, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, object) })
	Expect(start).NotTo(Equal(-1), "describe shows %s:\n%s", object, out)
	var rows []string
	for _, l := range lines[start+1:] {
		if describedObject.MatchString(l) {
			break
		}
		rows = append(rows, l)
	}
	for _, t := range types {
		cond := meta.FindStatusCondition(conds, t)
		Expect(cond).NotTo(BeNil(), "%s has condition %s", object, t)
		row := slices.IndexFunc(rows, func(l string) bool {
			f := strings.Fields(strings.Trim(l, "│├└─ "))
			return len(f) >= 3 && f[0] == t && f[1] == string(cond.Status) && f[2] == cond.Reason
		})
		Expect(row).NotTo(Equal(-1), "describe shows %s %s=%s %s under %s:\n%s", t, cond.Status, cond.Reason, object, out)
		msg := cond.Message[:min(len(cond.Message), 40)]
		Expect(strings.Join(rows[row:], " ")).To(ContainSubstring(msg), "describe shows the message of %s", t)
	}
	return rows
}

// deploymentAvailable reports the Deployment's Available condition.
func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectRunningDescribed checks, on a running cluster, that its Nodes are
// Ready because the flavor's ClusterResourceSet installed the CNI, and that
// clusterctl describe shows the provider's conditions on the KubevirtCluster
// and every KubevirtMachine. It returns them.
func expectRunningDescribed(ctx context.Context, ns, name string) (*infrav1.KubevirtCluster, []infrav1.KubevirtMachine) {
	GinkgoHelper()
	By("every Node is Ready: the flavor's ClusterResourceSet installed the CNI")
	expectCNIApplied(ctx, ns, name)
	By("clusterctl describe shows the provider's conditions of the running cluster")
	kc := kubevirtClusterOf(ctx, ns, name)
	out, err := cc.Run(ctx, "describe", "cluster", name, "-n", ns, "--kubeconfig", mgmt.Kubeconfig, "--show-conditions", "all", "--echo")
	Expect(err).NotTo(HaveOccurred())
	expectDescribed(out, "KubevirtCluster "+ns+"/"+kc.Name, kc.Status.Conditions, infrav1.InfraClusterAvailableCondition, infrav1.ControlPlaneEndpointReadyCondition)
	kms := &infrav1.KubevirtMachineList{}
	Expect(c.List(ctx, kms, client.InNamespace(ns))).To(Succeed())
	for _, km := range kms.Items {
		expectDescribed(out, "KubevirtMachine "+ns+"/"+km.Name, km.Status.Conditions, infrav1.VirtualMachineReadyCondition)
	}
	return kc, kms.Items
}

// runnableFlavors are the flavors whose cluster the generate-cluster specs
// run from their defaults alone. The machinepool and multus-ipam flavors
// have their own ordered specs (machinepool_test.go, ipam_test.go), which
// start from the defaults and go on with the same cluster; the default
// and topology flavors' clusters are Cluster API's quick starts'
// (clusterapi_test.go), which check the same of them (the topology one
// from an image repository of its own; the upgrade and scale specs run
// that flavor's defaults alone). The gpu flavor's cluster runs with two
// workers on device nodes (gpu_test.go): with its default of none, it
// would show nothing of the flavor.
func runnableFlavors() []string {
	return slices.DeleteFunc(flavors(), func(flavor string) bool {
		return flavor == "machinepool" || flavor == "multus-ipam" || flavor == "default" || flavor == "topology" || flavor == "gpu"
	})
}

// flavors are the flavors of templates/flavors/, one overlay directory
// each ("default" for cluster-template.yaml), which make generate renders
// into the templates/cluster-template*.yaml the release carries.
func flavors() []string {
	names, err := testenv.Flavors()
	if err != nil {
		panic(fmt.Sprintf("the flavors of %s: %v", testenv.FlavorsDir, err))
	}
	return names
}

var listedVariable = regexp.MustCompile(`^\s+- (\S+)\s*(?:\(defaults to (.*)\))?$`)

// listedVariables reads clusterctl's --list-variables output: each
// variable with its default, unquoted.
func listedVariables(out string) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if m := listedVariable.FindStringSubmatch(line); m != nil {
			vars[m[1]] = strings.Trim(m[2], `"`)
		}
	}
	return vars
}

var documentedVariable = regexp.MustCompile("^\\| `([A-Z_]+)` \\| ([^|]*) \\|")

// documentedVariables reads the variables table of docs/flavors.md: each
// variable with its default where the table gives a literal one.
func documentedVariables() map[string]string {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "flavors.md"))
	Expect(err).NotTo(HaveOccurred())
	vars := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := documentedVariable.FindStringSubmatch(line); m != nil {
			def := strings.TrimSpace(m[2])
			if strings.HasPrefix(def, "`") && strings.HasSuffix(def, "`") {
				vars[m[1]] = strings.Trim(def, "`\"")
			} else {
				vars[m[1]] = ""
			}
		}
	}
	Expect(vars).NotTo(BeEmpty(), "docs/flavors.md has no variables table")
	return vars
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// grantInfraNamespace creates what a platform administrator grants one
// tenant: a KubevirtClusterIdentity that lets tenantNS place its clusters
// on the management cluster in infraNS. It returns the identity's name.
func grantInfraNamespace(ctx context.Context, tenantNS, infraNS string) string {
	identity := &infrav1.KubevirtClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: tenantNS},
		Spec: infrav1.KubevirtClusterIdentitySpec{
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{tenantNS}},
			InfraNamespaces:   []string{infraNS},
		}}
	Expect(c.Create(ctx, identity)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(c.Delete(ctx, identity))).To(Succeed()) })
	return identity.Name
}

// withIdentity has a generated KubevirtCluster name the identity, and
// with onlyCluster leaves every other object out.
func withIdentity(identity string, onlyCluster bool) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if u.GetKind() != "KubevirtCluster" {
			if onlyCluster {
				return world.ErrSkipObject
			}
			return nil
		}
		return unstructured.SetNestedMap(u.Object, map[string]any{"kind": infrav1.KubevirtClusterIdentityKind, "name": identity}, "spec", "identityRef")
	}
}

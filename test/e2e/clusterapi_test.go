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
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	capiclusterctl "sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// Cluster API's own end-to-end specs (sigs.k8s.io/cluster-api/test/e2e),
// run unchanged against this provider: the specs its maintainers use to
// check an infrastructure provider against the contract. They reach the
// world's management cluster through a framework.ClusterProxy and render
// their clusters with clusterctl's library from the same local repository
// as the real clusterctl (clusterctl init already ran in BeforeSuite).

// capiHarness is what every Cluster API spec takes: built once per
// process, the first time a spec asks.
type capiHarness struct {
	proxy     framework.ClusterProxy
	config    *capiclusterctl.E2EConfig
	artifacts string
}

var (
	capiOnce sync.Once
	capi     capiHarness
)

// capiSpecs returns the harness, or skips the spec against a real cluster:
// the specs render from the sandbox's clusterctl repository.
func capiSpecs() capiHarness {
	if w == nil {
		Skip("Cluster API's specs render from the sandbox world's clusterctl repository")
	}
	capiOnce.Do(func() {
		artifacts := filepath.Join(testenv.RepoRoot(), "out", "test-logs", "capi-e2e"+os.Getenv(shardEnv))
		Expect(os.RemoveAll(artifacts)).To(Succeed())
		Expect(cc.AddTestFlavors(suite.ReleaseVersion, filepath.Join("testdata", "templates"))).To(Succeed())
		capi = capiHarness{
			proxy:     conflictRetryingProxy{framework.NewClusterProxy("management", mgmt.Kubeconfig, testenv.NewScheme())},
			config:    capiConfig(),
			artifacts: artifacts,
		}
	})
	return capi
}

// capiKubernetesVersion is the version the specs' clusters run: the
// flavors' default, whose image the world's registry holds.
const capiKubernetesVersion = "v1.34.1"

// capiKubernetesUpgradeTo is the upgrade spec's next version, whose image
// the world's registry holds too.
const capiKubernetesUpgradeTo = "v1.35.0"

// capiConfig is the specs' e2e configuration, written here instead of in a
// YAML file: clusterctl init ran already, so it names no providers to
// install, only the variables and the intervals. A wait the specs ask for
// and the map lacks falls back to Gomega's one second, so every key any
// spec in the package reads is here. The world provisions a machine in a
// few seconds; the waits are the suite's own timeout, polled each second.
func capiConfig() *capiclusterctl.E2EConfig {
	wait := []string{timeout.String(), "1s"}
	intervals := map[string][]string{}
	for _, key := range []string{
		"check-machines-stable", "wait-autoscaler", "wait-cluster", "wait-control-plane",
		"wait-control-plane-upgrade", "wait-controllers", "wait-delete-cluster",
		"wait-deployment-available", "wait-machine-deleted", "wait-machine-deployment-upgrade",
		"wait-machine-pool-nodes", "wait-machine-pool-upgrade", "wait-machine-provisioned",
		"wait-machine-remediation", "wait-machine-upgrade", "wait-machines", "wait-nodes-ready",
		"wait-resource-versions-become-stable", "wait-resource-versions-remain-stable", "wait-worker-nodes",
	} {
		intervals["default/"+key] = wait
	}
	// KCPAdoptionSpec applies its second step with the framework's
	// CreateOrUpdate, which retries an Update with the resourceVersion it
	// read first (framework/cluster_proxy.go:463): a status write to the
	// Cluster in between fails it for good. It applies that step as soon as
	// its wait for the first step's machines sees them Ready, while Cluster
	// API still writes the Cluster's conditions after them; polled every
	// 10 s, as the spec's own defaults do, that wait sees the machines a few
	// seconds later, once the Cluster is usually still. Usually: the
	// harness's proxy applies again on a conflict (conflictRetryingProxy).
	for _, key := range []string{"wait-cluster", "wait-control-plane"} {
		intervals["kcp-adoption/"+key] = []string{timeout.String(), "10s"}
	}
	return &capiclusterctl.E2EConfig{
		ManagementClusterName: "management",
		Variables: map[string]string{
			capie2e.KubernetesVersion: capiKubernetesVersion,
			// The upgrade spec's versions: the flavors' default and the
			// next minor, whose images the world's registry holds.
			capie2e.KubernetesVersionUpgradeFrom: capiKubernetesVersion,
			capie2e.KubernetesVersionUpgradeTo:   capiKubernetesUpgradeTo,
		},
		Intervals: intervals,
	}
}

var _ = Describe("Cluster API's quick start", func() {
	ctx := context.Background()
	// The default flavor's own checks (clusterctl_test.go runs every
	// other flavor's), then the resilience checks.
	quickStart(ctx, func(in *capie2e.QuickStartSpecInput) {
		in.PostMachinesProvisioned = func(proxy framework.ClusterProxy, ns, name string) {
			_, kms := expectRunningDescribed(ctx, ns, name)
			Expect(kms).To(HaveLen(2), "a control-plane machine and a worker")
			validateOwnership(ctx, proxy, ns, name, false)
		}
	})
})

// The topology flavor names ClusterClass kubevirt, which clusterctl adds
// to what it renders, as it does for a user. On the running cluster, the
// resilience checks, then the class's own (topology_test.go), from an image
// repository of the cluster's own.
var _ = Describe("Cluster API's quick start with ClusterClass", func() {
	ctx := context.Background()
	quickStart(ctx, func(in *capie2e.QuickStartSpecInput) {
		in.Flavor = ptr.To("topology")
		in.ClusterctlVariables = topologyVariables
		in.PostNamespaceCreated = func(framework.ClusterProxy, string) { addTopologyImages() }
		in.PostMachinesProvisioned = func(proxy framework.ClusterProxy, ns, name string) {
			validateOwnership(ctx, proxy, ns, name, true)
			classChecks(ctx, ns, name)
		}
	})
})

// quickStart runs QuickStartSpec with the harness's input, as set changes
// it.
func quickStart(ctx context.Context, set func(*capie2e.QuickStartSpecInput)) {
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		h := capiSpecs()
		in := capie2e.QuickStartSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
		}
		set(&in)
		in.SkipCleanup, in.PostNamespaceCreated = true, cleanUpLater(in.PostNamespaceCreated)
		return in
	})
}

// A Kubernetes minor upgrade through the topology: the control plane, then
// the workers, every Node on the new version, the tenant's kube-proxy on
// its image. Conformance is skipped: kubetest runs in a container engine.
// Then the provider's own checks: every machine's root disk is the class's
// image repository tagged with the new version, and the old version's
// golden image is collected once no template uses it.
var _ = Describe("Cluster API's cluster upgrade", func() {
	ctx := context.Background()
	var namespace string
	JustAfterEach(func() {
		if namespace == "" || CurrentSpecReport().Failed() {
			return
		}
		By("every root disk and the one golden image left are the new version's")
		kms := kubevirtMachines(ctx, namespace)
		Expect(kms).To(HaveLen(2), "a control-plane machine and a worker")
		for _, km := range kms {
			Expect(km.Spec.RootDisk.Image.Registry.URL).To(HaveSuffix(":"+capiKubernetesUpgradeTo), "KubevirtMachine %s", km.Name)
		}
		Eventually(func() []string { return goldenImageURLs(ctx, namespace) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(ConsistOf(HaveSuffix(":"+capiKubernetesUpgradeTo)), "the old version's golden image is collected after its retention")
	})
	capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
		h := capiSpecs()
		return capie2e.ClusterUpgradeConformanceSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			SkipConformanceTests:  true,
			Flavor:                ptr.To("topology"),
			WorkerMachineCount:    ptr.To[int64](1),
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(func(_ framework.ClusterProxy, ns string) { namespace = ns }),
		}
	})
})

// Deleting a cluster goes in Cluster API's order, each phase held by a
// finalizer the spec adds and then removes: the workers' Machines (with
// their MachineDeployment and MachineSet), then the control plane's (with
// the KubeadmControlPlane), then the KubevirtCluster, which the provider
// deletes only once both are gone, and the Cluster last.
var _ = Describe("Cluster API's cluster deletion", func() {
	ctx := context.Background()
	capie2e.ClusterDeletionSpec(ctx, func() capie2e.ClusterDeletionSpecInput {
		h := capiSpecs()
		return capie2e.ClusterDeletionSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			ClusterDeletionPhases: []capie2e.ClusterDeletionPhase{
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						return ref.Kind == "MachineDeployment" || ref.Kind == "MachineSet" ||
							ref.Kind == "Machine" && ownedByKind(owners, "MachineSet")
					},
					BlockingObjectFilter: isKind("Machine"),
				},
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						return ref.Kind == "KubeadmControlPlane" || ref.Kind == "Machine" && ownedByKind(owners, "KubeadmControlPlane")
					},
					BlockingObjectFilter: isKind("Machine"),
				},
				{
					ObjectFilter:         isKind("KubevirtCluster"),
					BlockingObjectFilter: isKind("KubevirtCluster"),
				},
			},
		}
	})
})

// isKind filters the objects of a deletion phase by kind.
func isKind(kind string) func(corev1.ObjectReference, []metav1.OwnerReference) bool {
	return func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == kind }
}

func ownedByKind(owners []metav1.OwnerReference, kind string) bool {
	return slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool { return o.Kind == kind })
}

// ScaleSpec, turned down from ten clusters of four machines to what two
// cores hold beside the other specs: three clusters of a control-plane
// machine and a worker, created side by side from one ClusterClass, then
// deleted side by side. Its upgrade step is skipped: the upgrade spec above
// runs it.
var _ = Describe("Cluster API's scale", func() {
	ctx := context.Background()
	capie2e.ScaleSpec(ctx, func() capie2e.ScaleSpecInput {
		h := capiSpecs()
		return capie2e.ScaleSpecInput{
			E2EConfig:                       h.config,
			ClusterctlConfigPath:            cc.Config,
			BootstrapClusterProxy:           h.proxy,
			ArtifactFolder:                  h.artifacts,
			Flavor:                          ptr.To("topology"),
			ClusterClassName:                "kubevirt",
			ClusterCount:                    ptr.To[int64](3),
			Concurrency:                     ptr.To[int64](3),
			ControlPlaneMachineCount:        ptr.To[int64](1),
			MachineDeploymentCount:          ptr.To[int64](1),
			WorkerPerMachineDeploymentCount: ptr.To[int64](1),
			SkipUpgrade:                     true,
			FailFast:                        true,
			PostNamespaceCreated:            namespaceCNI(ctx),
		}
	})
})

// namespaceCNI installs the flavor's CNI for every flannel cluster of a
// namespace. ScaleSpec renders the flavor once, for a placeholder cluster
// name, and keeps everything but the Cluster as the class's objects: the
// flavor's ClusterResourceSet then selects the placeholder's name, which no
// cluster has. This is the namespace-wide ClusterResourceSet docs/cni.md
// describes: the flavor's, selecting by the CNI label alone.
func namespaceCNI(ctx context.Context) func(framework.ClusterProxy, string) {
	return func(proxy framework.ClusterProxy, ns string) {
		generated, err := cc.Run(ctx, "generate", "cluster", "cni", "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--flavor", "topology")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAMLWith(ctx, proxy.GetClient(), []byte(generated), func(u *unstructured.Unstructured) error {
			switch u.GetKind() {
			case "ClusterResourceSet":
				unstructured.RemoveNestedField(u.Object, "spec", "clusterSelector", "matchLabels", clusterv1.ClusterNameLabel)
				return nil
			case "ConfigMap":
				return nil
			}
			return world.ErrSkipObject
		})).To(Succeed())
	}
}

// A KubeadmControlPlane adopts a control-plane machine made without one:
// the kcp-adoption test flavor's first step is a bare Machine with its
// KubeadmConfig and KubevirtMachine, its second the KubeadmControlPlane.
// The spec then wants every Secret labelled with the cluster's name to be
// Cluster API's, taken over by the KubeadmControlPlane, which is why a
// machine's user data Secret does not carry that label. Its namespace gets
// the namespace-wide CNI: the spec applies only the objects of its steps.
var _ = Describe("Cluster API's KubeadmControlPlane adoption", func() {
	ctx := context.Background()
	capie2e.KCPAdoptionSpec(ctx, func() capie2e.KCPAdoptionSpecInput {
		h := capiSpecs()
		return capie2e.KCPAdoptionSpecInput{
			E2EConfig:             h.config,
			ClusterctlConfigPath:  cc.Config,
			BootstrapClusterProxy: h.proxy,
			ArtifactFolder:        h.artifacts,
			SkipCleanup:           true,
			PostNamespaceCreated:  cleanUpLater(namespaceCNI(ctx)),
		}
	})
	// KCPAdoptionSpec sets Gomega's default Eventually timeout and polling
	// (15 minutes, every 10 seconds) while the suite's tree is built, in
	// every process and shard, focused or not: put back Gomega's timeout and
	// testenv's polling for every other spec, and give this one the
	// suite's timeout, polled each second, while it runs.
	SetDefaultEventuallyTimeout(gomegaDefaultTimeout)
	SetDefaultEventuallyPollingInterval(testenv.DefaultPolling)
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(time.Second)
		DeferCleanup(func() {
			SetDefaultEventuallyTimeout(gomegaDefaultTimeout)
			SetDefaultEventuallyPollingInterval(testenv.DefaultPolling)
		})
	})
})

// gomegaDefaultTimeout is Gomega's own default Eventually timeout, which
// the suite's assertions without a timeout of their own rely on.
const gomegaDefaultTimeout = time.Second

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

// Package upgrade holds the clusterctl upgrade specs: the provider of an
// earlier commit, built from its own source and installed by clusterctl
// init, runs a tenant cluster; clusterctl upgrade apply replaces it with
// this build's release, and the tenant keeps running.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/clusterctl"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// previousCommit is the earlier release the specs upgrade from: the first
// commit whose provider the world can run as clusterctl installs it.
const previousCommit = "19f883f"

const (
	previousVersion = "v0.2.0"
	currentVersion  = "v0.2.1"
)

var (
	setup    *suite.Setup
	w        *world.World
	cc       *clusterctl.Clusterctl
	mgmt     clusterctl.Management
	provider *world.PodRunner
	timeout  = 5 * time.Minute
)

func TestUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CAPKV clusterctl upgrade")
}

// previousDir holds the previous release and its manager binary.
var previousDir string

var _ = BeforeSuite(func() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	// The previous release, built from its commit, is installed first; it
	// builds while the world starts, which mostly waits.
	var err error
	previousDir, err = os.MkdirTemp("", "capkv-previous-release-")
	Expect(err).NotTo(HaveOccurred())
	type built struct {
		release clusterctl.Release
		binary  string
		err     error
	}
	done := make(chan built, 1)
	go func() {
		r, binary, err := clusterctl.BuildRelease(ctx, previousCommit, previousVersion, previousDir)
		done <- built{r, binary, err}
	}()
	setup, err = suite.Start(suite.Options{Version: currentVersion})
	b := <-done
	Expect(err).NotTo(HaveOccurred())
	Expect(b.err).NotTo(HaveOccurred())
	w, cc, mgmt = setup.World, setup.Clusterctl, setup.Managements[0]
	previous, binary := b.release, b.binary
	Expect(cc.AddRelease(previous)).To(Succeed())
	cc.Binaries = map[string]string{clusterctl.ImageOf(previousVersion): binary}
	_, err = setup.Init(ctx, previousVersion)
	Expect(err).NotTo(HaveOccurred())
	provider = setup.Providers[0]
})

var _ = AfterSuite(func() {
	if setup != nil {
		Expect(setup.Stop()).To(Succeed())
	}
	Expect(os.RemoveAll(previousDir)).To(Succeed())
})

var _ = Describe("clusterctl upgrade", Ordered, func() {
	ctx := context.Background()
	var ns string

	BeforeAll(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-upgrade-"}}
		Expect(w.Env.Client.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		// The previous release's flavor defaults to a stock cloud image,
		// which never joins; its users set an image with Kubernetes.
		out, err := cc.RunWithVariables(ctx, map[string]string{"CAPKV_NODE_IMAGE_URL": "https://images.example/ubuntu-2404-kube-v1.34.1.qcow2"},
			"generate", "cluster", "up", "--infrastructure", "kubevirt:"+previousVersion, "-n", ns, "--worker-machine-count", "1")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, w.Env.Client, []byte(out))).To(Succeed())
		// The previous release's flavors carry no CNI: its users installed one.
		Expect(world.InstallCNI(ctx, w.Env.Client, ns, "up")).To(Succeed())
	})

	It("upgrades the provider under a running tenant cluster: nothing recreated, the new provider resumes", func() {
		Expect(deploymentImage(ctx)).To(Equal(clusterctl.ImageOf(previousVersion)), "the previous release runs first")
		expectMachinesWithNodes(ctx, ns, 2)
		before := infraUIDs(ctx, ns)
		Expect(before).To(HaveKeyWithValue("VirtualMachine", HaveLen(2)))

		plan, err := cc.Run(ctx, "upgrade", "plan", "--kubeconfig", mgmt.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(plan).To(MatchRegexp(`infrastructure-kubevirt\s+capkv-system\s+InfrastructureProvider\s+` + previousVersion + `\s+` + currentVersion))
		_, err = cc.Run(ctx, "upgrade", "apply", "--infrastructure", "capkv-system/kubevirt:"+currentVersion,
			"--kubeconfig", mgmt.Kubeconfig, "--wait-providers", "--wait-provider-timeout", "300")
		Expect(err).NotTo(HaveOccurred())
		Expect(deploymentImage(ctx)).NotTo(Equal(clusterctl.ImageOf(previousVersion)), "this build's release runs now")

		By("the new provider scales the workers, and every VM from before keeps running")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			md := &clusterv1.MachineDeployment{}
			if err := w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "up-md-0"}, md); err != nil {
				return err
			}
			md.Spec.Replicas = ptr.To[int32](2)
			return w.Env.Client.Update(ctx, md)
		})).To(Succeed())
		expectMachinesWithNodes(ctx, ns, 3)
		after := infraUIDs(ctx, ns)
		Expect(after["VirtualMachine"]).To(SatisfyAll(HaveLen(3), ContainElements(before["VirtualMachine"])))
		for _, kind := range []string{"VirtualMachineInstance", "DataVolume", "Service"} {
			Expect(after[kind]).To(ContainElements(before[kind]), "no %s of the tenant was recreated", kind)
		}
	})
})

// deploymentImage is the image of the provider's installed Deployment.
func deploymentImage(ctx context.Context) string {
	d := &appsv1.Deployment{}
	Expect(w.Env.Client.Get(ctx, clusterctl.Deployment, d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0].Image
}

// expectMachinesWithNodes waits for n Machines, each with a Node.
func expectMachinesWithNodes(ctx context.Context, ns string, n int) {
	Eventually(func() (string, error) { return world.MachinesWithNodes(ctx, w.Env.Client, ns) }).
		WithTimeout(timeout).WithPolling(time.Second).Should(Equal(fmt.Sprintf("%d machines, %d with a Node", n, n)),
		func() string { return provider.Logs() })
}

// infraUIDs are the UIDs of the tenant's objects on the infra cluster.
func infraUIDs(ctx context.Context, ns string) map[string][]string {
	uids, err := world.TenantUIDs(ctx, w.Infra.Client, ns)
	Expect(err).NotTo(HaveOccurred())
	return uids
}

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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("A Kubernetes minor upgrade of the default flavor", func() {
	ctx := context.Background()
	BeforeEach(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
	})

	It("rolls the control plane, then the workers, onto new templates with the new version's image", func() {
		const (
			name = "minor"
			from = "v1.34.1"
			to   = "v1.35.0"
		)
		ns := newNamespace(ctx, "e2e-k8s-upgrade-")
		out, err := cc.RunWithVariables(ctx, map[string]string{"KUBERNETES_VERSION": from},
			"generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns, "--worker-machine-count", "1")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAML(ctx, c, []byte(out))).To(Succeed())
		expectRunning(ctx, ns, name)
		expectMachinesWithNodes(ctx, ns, 2)
		expectKubelets(ctx, ns, from)
		before := machineUIDs(ctx, ns)
		oldGolden := goldenVolumeNames(ctx, ns)

		By("the control plane: a template with the new image, then the new version")
		cpTemplate := copyTemplateForVersion(ctx, ns, name+"-control-plane", from, to)
		Expect(retryWrite(func() error {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}, kcp); err != nil {
				return err
			}
			kcp.Spec.Version = to
			kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = cpTemplate
			return c.Update(ctx, kcp)
		})).To(Succeed())
		expectControlPlaneUpgraded(ctx, ns, to)

		By("the workers, once the control plane runs the new version")
		mdTemplate := copyTemplateForVersion(ctx, ns, name+"-md-0", from, to)
		Expect(retryWrite(func() error {
			md := &clusterv1.MachineDeployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-md-0"}, md); err != nil {
				return err
			}
			md.Spec.Template.Spec.Version = to
			md.Spec.Template.Spec.InfrastructureRef.Name = mdTemplate
			return c.Update(ctx, md)
		})).To(Succeed())
		expectAllReplaced(ctx, ns, before, 2)
		expectKubelets(ctx, ns, to)

		By("the old templates go, and with their last user the old golden image")
		for _, old := range []string{name + "-control-plane", name + "-md-0"} {
			Expect(c.Delete(ctx, &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old}})).To(Succeed())
		}
		Eventually(func() []string { return goldenVolumeNames(ctx, ns) }).WithTimeout(timeout).WithPolling(time.Second).
			Should(SatisfyAll(HaveLen(1), Not(ContainElements(oldGolden))), func() string { return describe(ctx, ns) })
		deleteClusterLater(ctx, ns, name)
	})
})

// copyTemplateForVersion creates a copy of a KubevirtMachineTemplate whose
// root disk image carries version to instead of from, as a user upgrading a
// plain flavor does (templates are immutable), and returns its name.
func copyTemplateForVersion(ctx context.Context, ns, name, from, to string) string {
	tmpl := &infrav1.KubevirtMachineTemplate{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tmpl)).To(Succeed())
	next := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + strings.ReplaceAll(to, ".", "-")},
		Spec: *tmpl.Spec.DeepCopy()}
	image := next.Spec.Template.Spec.RootDisk.Image.Registry
	Expect(image.URL).To(HaveSuffix(":"+from), "the flavor's image is tagged with the version")
	image.URL = strings.TrimSuffix(image.URL, from) + to
	Expect(c.Create(ctx, next)).To(Succeed())
	return next.Name
}

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
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// communityVariables are what a user of the community provider's
// templates sets; those templates have no defaults.
var communityVariables = map[string]string{
	"KUBERNETES_VERSION":          "v1.34.1",
	"CONTROL_PLANE_MACHINE_COUNT": "1",
	"WORKER_MACHINE_COUNT":        "1",
	"NODE_VM_IMAGE_TEMPLATE":      "quay.io/capk/ubuntu-2404-container-disk:v1.34.1",
	"CRI_PATH":                    "/var/run/containerd/containerd.sock",
	"INSTANCE_TYPE":               "u1.large",
	"INSTANCE_PREFERENCE":         "ubuntu",
	"SSH_AUTHORIZED_KEY":          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample user@example",
}

// BeforeAll applies both clusters at once, as the flavors' container in
// clusterctl_test.go does.
var _ = Describe("manifests written for the community provider", Ordered, ContinueOnFailure, func() {
	ctx := context.Background()
	var defaultNS, flatcarNS string
	BeforeAll(func() {
		if w == nil {
			Skip("needs the sandbox world's clusterctl configuration")
		}
		defaultNS = newNamespace(ctx, "e2e-capk-")
		applyGenerated(ctx, defaultNS, communityVariables, "generate", "cluster", "capk",
			"--from", filepath.Join("testdata", "capk", "cluster-template.yaml"))
		// It applies because Cluster API's Ignition feature gate is on, as
		// this flavor needs.
		flatcarNS = newNamespace(ctx, "e2e-capk-flatcar-")
		applyGenerated(ctx, flatcarNS, communityVariables, "generate", "cluster", "flatcar",
			"--from", filepath.Join("testdata", "capk", "cluster-template-lb-flatcar.yaml"))
		// These manifests carry no CNI: their users install one.
		Expect(world.InstallCNI(ctx, c, defaultNS, "capk")).To(Succeed())
		Expect(world.InstallCNI(ctx, c, flatcarNS, "flatcar")).To(Succeed())
	})

	It("runs its default flavor, whose control plane is behind a ClusterIP Service, to Running", func() {
		ns := defaultNS
		expectRunning(ctx, ns, "capk")
		expectMachinesWithNodes(ctx, ns, 2)
		kc := kubevirtClusterOf(ctx, ns, "capk")
		svc := &corev1.Service{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capk-lb"}, svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(kc.Spec.ControlPlaneEndpoint.Host).To(Equal(svc.Spec.ClusterIP), "the endpoint is the Service's ClusterIP")
		deleteClusterLater(ctx, ns, "capk")
	})

	It("applies its Flatcar flavor unchanged, and kubeadm bootstraps it with Ignition", func() {
		ns := flatcarNS
		Eventually(func(g Gomega) string {
			configs := &bootstrapv1.KubeadmConfigList{}
			g.Expect(c.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
			for _, cfg := range configs.Items {
				if cfg.Status.DataSecretName == "" {
					continue
				}
				data := &corev1.Secret{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cfg.Status.DataSecretName}, data)).To(Succeed())
				return string(data.Data["format"])
			}
			return "no bootstrap data yet"
		}).WithTimeout(timeout).Should(Equal("ignition"), func() string { return describe(ctx, ns) })
		Expect(kubevirtMachines(ctx, ns)).NotTo(BeEmpty())
		deleteClusterLater(ctx, ns, "flatcar")
	})
})

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

package world_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

const worldGroup = "infrastructure.world.capkv.io"

func worldObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(worldGroup + "/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestClusterAPIWorld proves the Cluster API side of the world before the
// provider is wired in: the real Cluster API controllers, with a trivial
// test-only machine kind, bring a KubeadmControlPlane to 3 ready replicas
// (passing its etcd and control-plane health checks against in-memory
// workload clusters) and a MachineDeployment to its replicas with NodeRefs.
func TestClusterAPIWorld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	c := w.Env.Client
	version := "v1.33.0"
	infraMachines := clusterv1.ContractVersionedObjectReference{APIGroup: worldGroup, Kind: "WorldMachineTemplate", Name: "machines"}

	g.Expect(c.Create(ctx, worldObject("WorldCluster", ns, "tenant", map[string]any{}))).To(Succeed())
	g.Expect(c.Create(ctx, worldObject("WorldMachineTemplate", ns, "machines", map[string]any{"template": map[string]any{"spec": map[string]any{}}}))).To(Succeed())
	g.Expect(c.Create(ctx, &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-cp", Namespace: ns},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3), Version: version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{InfrastructureRef: infraMachines}},
		},
	})).To(Succeed())
	g.Expect(c.Create(ctx, &bootstrapv1.KubeadmConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec:       bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{}},
	})).To(Succeed())
	// Nodes turn Ready only with a CNI: the flavors' one.
	g.Expect(world.ApplyCNIAddon(ctx, c, ns, "tenant")).To(Succeed())
	g.Expect(c.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns, Labels: world.CNILabels("tenant")},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: worldGroup, Kind: "WorldCluster", Name: "tenant"},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "tenant-cp"},
		},
	})).To(Succeed())
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "tenant", Replicas: ptr.To[int32](2),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "workers"}},
				Spec: clusterv1.MachineSpec{
					ClusterName: "tenant", Version: version, InfrastructureRef: infraMachines,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "workers"}},
				},
			},
		},
	}
	g.Expect(c.Create(ctx, md)).To(Succeed())

	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Eventually(func() int32 {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tenant-cp"}, kcp); err != nil {
			return -1
		}
		return ptr.Deref(kcp.Status.ReadyReplicas, 0)
	}, 5*time.Minute, time.Second).Should(BeEquivalentTo(3), "KubeadmControlPlane conditions: %+v", func() any { return kcp.Status.Conditions })
	g.Eventually(func() int32 {
		if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
			return -1
		}
		return ptr.Deref(md.Status.ReadyReplicas, 0)
	}, 3*time.Minute, time.Second).Should(BeEquivalentTo(2))

	machines := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "tenant"})).To(Succeed())
	g.Expect(machines.Items).To(HaveLen(5))
	for _, m := range machines.Items {
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no NodeRef", m.Name)
	}
}

// TestV1Beta1ManifestsConvert applies a Cluster written against Cluster
// API's older v1beta1 API, as many existing manifests are, and reads it back
// as v1beta2 through the conversion webhook the world serves.
func TestV1Beta1ManifestsConvert(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": "legacy", "namespace": ns},
		"spec": map[string]any{
			"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []any{"10.243.0.0/16"}}},
			"infrastructureRef": map[string]any{
				"apiVersion": worldGroup + "/v1alpha1", "kind": "WorldCluster", "name": "legacy",
			},
		},
	}}
	g.Expect(w.Env.Client.Create(ctx, old)).To(Succeed())
	got := &clusterv1.Cluster{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, got)).To(Succeed())
	g.Expect(got.Spec.ClusterNetwork.Pods.CIDRBlocks).To(Equal([]string{"10.243.0.0/16"}))
	g.Expect(got.Spec.InfrastructureRef).To(Equal(clusterv1.ContractVersionedObjectReference{
		APIGroup: worldGroup, Kind: "WorldCluster", Name: "legacy"}))
}

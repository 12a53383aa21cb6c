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
	"fmt"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// endpoint polls the KubevirtCluster's endpoint once provisioned.
func (tc *tenantCluster) endpoint() func() string {
	return func() string {
		kc := &infrav1.KubevirtCluster{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(tc.kc), kc); err != nil {
			return err.Error()
		}
		if !ptr.Deref(kc.Status.Initialization.Provisioned, false) {
			c := conditions.Get(kc, infrav1.ControlPlaneEndpointReadyCondition)
			if c == nil {
				return "not provisioned"
			}
			return "not provisioned: " + c.Reason + ": " + c.Message
		}
		return fmt.Sprintf("%s:%d", kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port)
	}
}

func TestControlPlaneServiceTypes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	clusterIP := ownedCluster(t, nil)
	eventually(t, clusterIP.endpoint()).Should(MatchRegexp(`^127\.[0-9.]+:6443$`))
	svc := &corev1.Service{}
	g.Expect(clusterIP.c.Get(ctx, client.ObjectKey{Namespace: clusterIP.ns, Name: "tenant-lb"}, svc)).To(Succeed())
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{infrav1.ClusterNameLabel: "tenant", infrav1.RoleLabel: infrav1.RoleControlPlane,
		infrav1.KubevirtMachineNamespaceLabel: clusterIP.ns}))

	lb := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeLoadBalancer
		kc.Spec.ControlPlaneServiceTemplate.Spec.Port = 443
	})
	// The simulated load balancer gives each Service its own loopback IP.
	eventually(t, lb.endpoint()).Should(MatchRegexp(`^127\.1\.[0-9.]+:443$`))

	nodePort := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeNodePort
	})
	// Without a host, the endpoint is the first Ready infra node's address
	// (infra-a's, the first by name), where kube-proxy serves the node port.
	infraA := &corev1.Node{}
	g.Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: "infra-a"}, infraA)).To(Succeed())
	infraAIP := sim.InternalIP(infraA)
	g.Expect(infraAIP).NotTo(BeEmpty())
	eventually(t, nodePort.endpoint()).Should(MatchRegexp(`^` + regexp.QuoteMeta(infraAIP) + `:3[0-9]{4}$`))

	// With the host given, the first node port becomes the endpoint port
	// and stays the Service's; switching to None removes the Service.
	nodePortHost := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = corev1.ServiceTypeNodePort
		kc.Spec.ControlPlaneEndpoint.Host = "node-1.infra.example"
	})
	eventually(t, nodePortHost.endpoint()).Should(MatchRegexp(`^node-1\.infra\.example:3[0-9]{4}$`))
	ep := nodePortHost.endpoint()()
	key := client.ObjectKey{Namespace: nodePortHost.ns, Name: "tenant-lb"}
	nodePortOf := func() string {
		s := &corev1.Service{}
		if err := nodePortHost.c.Get(ctx, key, s); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("node-1.infra.example:%d (port %d)", s.Spec.Ports[0].NodePort, s.Spec.Ports[0].Port)
	}
	g.Expect(nodePortOf()).To(Equal(ep + " (port 6443)"))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kc := get(t, nodePortHost.c, nodePortHost.kc)
		metav1.SetMetaDataAnnotation(&kc.ObjectMeta, "test.capkv.io/touch", "1")
		return nodePortHost.c.Update(ctx, kc)
	})).To(Succeed())
	g.Consistently(nodePortOf).WithTimeout(2 * time.Second).Should(Equal(ep + " (port 6443)"))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kc := get(t, nodePortHost.c, nodePortHost.kc)
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = infrav1.ServiceTypeNone
		return nodePortHost.c.Update(ctx, kc)
	})).To(Succeed())
	eventually(t, func() bool { return apierrors.IsNotFound(nodePortHost.c.Get(ctx, key, &corev1.Service{})) }).Should(BeTrue())
	g.Expect(nodePortHost.endpoint()()).To(Equal(ep))

	none := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneServiceTemplate.Spec.Type = infrav1.ServiceTypeNone
		kc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.tenant.example", Port: 443}
	})
	eventually(t, none.endpoint()).Should(Equal("api.tenant.example:443"))
	g.Expect(apierrors.IsNotFound(none.c.Get(ctx, client.ObjectKey{Namespace: none.ns, Name: "tenant-lb"}, &corev1.Service{}))).To(BeTrue())
}

func TestUserEndpointRespected(t *testing.T) {
	hostOnly := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneEndpoint.Host = "api.blue.example"
	})
	portOnly := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneEndpoint.Port = 7443
	})
	both := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.green.example", Port: 8443}
	})
	eventually(t, hostOnly.endpoint()).Should(Equal("api.blue.example:6443"))
	eventually(t, portOnly.endpoint()).Should(MatchRegexp(`^127\.[0-9.]+:7443$`))
	eventually(t, both.endpoint()).Should(Equal("api.green.example:8443"))
	// The Service still fronts the control plane, on the user's port.
	svc := &corev1.Service{}
	NewWithT(t).Expect(both.c.Get(context.Background(), client.ObjectKey{Namespace: both.ns, Name: "tenant-lb"}, svc)).To(Succeed())
	NewWithT(t).Expect(svc.Spec.Ports[0].Port).To(Equal(int32(8443)))
}

func TestControlPlaneServiceDriftAndDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a := ownedCluster(t, nil)
	eventually(t, a.endpoint()).Should(MatchRegexp(`:6443$`))
	key := client.ObjectKey{Namespace: a.ns, Name: "tenant-lb"}
	svc := &corev1.Service{}
	g.Expect(a.c.Get(ctx, key, svc)).To(Succeed())
	svc.Spec.Selector = map[string]string{"app": "hijacked"}
	g.Expect(a.c.Update(ctx, svc)).To(Succeed())
	eventually(t, func() map[string]string {
		s := &corev1.Service{}
		_ = a.c.Get(ctx, key, s)
		return s.Spec.Selector
	}).Should(HaveKeyWithValue(infrav1.RoleLabel, infrav1.RoleControlPlane))

	g.Expect(a.c.Delete(ctx, a.kc)).To(Succeed())
	eventually(t, func() bool {
		return apierrors.IsNotFound(a.c.Get(ctx, client.ObjectKeyFromObject(a.kc), &infrav1.KubevirtCluster{}))
	}).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(a.c.Get(ctx, key, &corev1.Service{}))).To(BeTrue())
}

func TestFailureDomains(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	discovered := ownedCluster(t, nil)
	domains := func() []string {
		kc := get(t, discovered.c, discovered.kc)
		var names []string
		for _, fd := range kc.Status.FailureDomains {
			names = append(names, fmt.Sprintf("%s/%v", fd.Name, ptr.Deref(fd.ControlPlane, false)))
		}
		return names
	}
	eventually(t, domains).Should(Equal([]string{"zone-a/true", "zone-b/true", "zone-c/true"}))

	// A zone of tainted GPU nodes only takes no control-plane machine,
	// which would wait there unscheduled; untainted, it takes them again.
	gpuNode := world.DefaultNodes()[0]
	gpuNode.Name, gpuNode.Zone = "infra-gpu-zone", "zone-gpu"
	gpuNode.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	g.Expect(sim.CreateNodes(ctx, w.Env.Client, gpuNode)).To(Succeed())
	t.Cleanup(func() {
		g.Expect(w.Env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: gpuNode.Name}})).To(Succeed())
	})
	eventually(t, domains).Should(Equal([]string{"zone-a/true", "zone-b/true", "zone-c/true", "zone-gpu/false"}))
	node := &corev1.Node{}
	g.Expect(w.Env.Client.Get(ctx, client.ObjectKey{Name: gpuNode.Name}, node)).To(Succeed())
	node.Spec.Taints = nil
	g.Expect(w.Env.Client.Update(ctx, node)).To(Succeed())
	eventually(t, domains).Should(Equal([]string{"zone-a/true", "zone-b/true", "zone-c/true", "zone-gpu/true"}))

	explicit := ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
		kc.Spec.FailureDomains = []infrav1.FailureDomainSpec{
			{Name: "rack-c", NodeSelector: map[string]string{corev1.LabelHostname: "infra-c"}},
			{Name: "rack-a", ControlPlane: ptr.To(false), NodeSelector: map[string]string{corev1.LabelHostname: "infra-a"}},
		}
	})
	eventually(t, func() int { return len(get(t, explicit.c, explicit.kc).Status.FailureDomains) }).Should(Equal(2))
	fds := get(t, explicit.c, explicit.kc).Status.FailureDomains
	g.Expect(fds[0].Name).To(Equal("rack-a"))
	g.Expect(*fds[0].ControlPlane).To(BeFalse())

	// A machine in rack-c lands on the node its selector names.
	km := explicit.newMachine(t, fixture.MachineOptions{Name: "rack-c-0", NoBootstrap: true})
	m := get(t, explicit.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "rack-c-0", Namespace: explicit.ns}})
	m.Spec.FailureDomain = "rack-c"
	g.Expect(explicit.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rack-c-0-bootstrap", Namespace: explicit.ns},
		Data: map[string][]byte{"value": []byte(fixture.ValidCloudConfig)}})).To(Succeed())
	m.Spec.Bootstrap.DataSecretName = ptr.To("rack-c-0-bootstrap")
	g.Expect(explicit.c.Update(ctx, m)).To(Succeed())
	eventually(t, explicit.provisioned(km)).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(infraGet(t, w.Env.Client, explicit.ns, km.Name, vmi)).To(Succeed())
	g.Expect(vmi.Status.NodeName).To(Equal("infra-c"))
}

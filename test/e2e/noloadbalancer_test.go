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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
)

// applyWithoutLoadBalancer applies the default flavor with one worker in a
// namespace of its own whose Services no load balancer serves, as on an
// infra cluster without MetalLB or the like (a MetalLB pool can serve some
// namespaces only), and returns the namespace. The flavors' container
// applies it beside its other clusters.
func applyWithoutLoadBalancer(ctx context.Context) string {
	GinkgoHelper()
	ns := newNamespace(ctx, "e2e-no-lb-")
	w.Sim.SetLoadBalancerIn(ns, false)
	DeferCleanup(func() { w.Sim.SetLoadBalancerIn(ns, true) })
	applyGenerated(ctx, ns, nil, "generate", "cluster", "nolb", "--infrastructure", "kubevirt:"+suite.ReleaseVersion,
		"--worker-machine-count", "1")
	return ns
}

// expectLoadBalancerFallback checks that the cluster applyWithoutLoadBalancer
// applied still comes up with defaults alone, its endpoint fallen back to
// the control-plane Service's cluster IP
// (docs/clusters.md#without-a-load-balancer), and says so in an Event.
func expectLoadBalancerFallback(ctx context.Context, ns string) {
	expectRunning(ctx, ns, "nolb")
	expectMachinesWithNodes(ctx, ns, 2)

	kc := kubevirtClusterOf(ctx, ns, "nolb")
	svc := &corev1.Service{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kc.Name + "-lb"}, svc)).To(Succeed())
	Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
	Expect(svc.Status.LoadBalancer.Ingress).To(BeEmpty(), "no load balancer gave the Service an address")
	Expect(kc.Spec.ControlPlaneEndpoint.Host).To(Equal(svc.Spec.ClusterIP), "the endpoint fell back to the Service's cluster IP")

	events := &eventsv1.EventList{}
	Expect(c.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "KubevirtCluster" && e.Regarding.Name == kc.Name && e.Reason == cluster.LoadBalancerUnavailableReason {
			notes = append(notes, e.Note)
		}
	}
	Expect(notes).To(ConsistOf(ContainSubstring("the endpoint is its cluster IP")))
	deleteClusterLater(ctx, ns, "nolb")
}

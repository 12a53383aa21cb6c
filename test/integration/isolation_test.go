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
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/np-guard/netpol-analyzer/pkg/netpol/eval"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// flow is one row of the flow table in docs/isolation.md.
type flow struct {
	from, to, protocol, port string
	allowed                  bool
}

// flowTable reads the flow table of docs/isolation.md, so the doc and the
// test cannot disagree.
func flowTable(t *testing.T) []flow {
	t.Helper()
	f, err := os.Open("../../docs/isolation.md")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var flows []flow
	inTable := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inTable = line == "## Flow table"
			continue
		}
		if !inTable || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| From") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		proto, port, _ := strings.Cut(cells[2], " ")
		flows = append(flows, flow{from: cells[0], to: cells[1], protocol: proto, port: port, allowed: cells[3] == "allowed"})
	}
	if len(flows) < 20 {
		t.Fatalf("docs/isolation.md lists only %d flows", len(flows))
	}
	return flows
}

// launcherPod waits for the virt-launcher pod of a machine's VM to be
// scheduled and have an IP.
func launcherPod(t *testing.T, tc *tenantCluster, km *infrav1.KubevirtMachine) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, func() error {
		pods := &corev1.PodList{}
		if err := tc.c.List(context.Background(), pods, client.InNamespace(tc.ns), client.MatchingLabels{infrav1.VMNameLabel: km.Name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d launcher pods for %s", len(pods.Items), km.Name)
		}
		pod = &pods.Items[0]
		if pod.Spec.NodeName == "" || pod.Status.PodIP == "" {
			return fmt.Errorf("launcher pod %s has no node or IP yet", pod.Name)
		}
		return nil
	}).Should(Succeed())
	return pod
}

func TestIsolationFlowTable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	monitoring := infrav1.CustomNetworkPolicy{Name: "monitoring", Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: "monitoring"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(9100))}},
		}},
	}}
	tenants := map[string]*tenantCluster{
		"A": ownedCluster(t, nil),
		"B": ownedCluster(t, nil),
		"C": ownedCluster(t, func(kc *infrav1.KubevirtCluster) {
			kc.Spec.CustomNetworkPolicies = []infrav1.CustomNetworkPolicy{monitoring}
		}),
	}
	pe := eval.NewPolicyEngine()
	peers := map[string]string{
		"external client": "203.0.113.7", "management cluster node": "192.0.2.50", "internet": "8.8.8.8", "image server": "198.51.100.10",
		"infra service IP": "10.96.0.1", "infra pod IP": "10.244.3.7", "metadata service": "169.254.169.254",
		"node-local DNS cache": "169.254.20.10",
	}
	// All three clusters are named "tenant", in namespaces of their own, as
	// the selectors must tell them apart by namespace too.
	for name, tc := range tenants {
		eventually(t, tc.endpoint()).Should(MatchRegexp(`:6443$`))
		cp := tc.newMachine(t, fixture.MachineOptions{Name: "cp", ControlPlane: true})
		worker := tc.newMachine(t, fixture.MachineOptions{Name: "worker"})
		peers[name+" control plane"] = client.ObjectKeyFromObject(launcherPod(t, tc, cp)).String()
		peers[name+" worker"] = client.ObjectKeyFromObject(launcherPod(t, tc, worker)).String()
		policies := &networkingv1.NetworkPolicyList{}
		g.Expect(tc.c.List(ctx, policies, client.InNamespace(tc.ns))).To(Succeed())
		g.Expect(policies.Items).NotTo(BeEmpty())
		for i := range policies.Items {
			g.Expect(pe.InsertObject(&policies.Items[i])).To(Succeed())
		}
		pods := &corev1.PodList{}
		g.Expect(tc.c.List(ctx, pods, client.InNamespace(tc.ns))).To(Succeed())
		for i := range pods.Items {
			g.Expect(pe.InsertObject(&pods.Items[i])).To(Succeed())
		}
		ns := &corev1.Namespace{}
		g.Expect(tc.c.Get(ctx, client.ObjectKey{Name: tc.ns}, ns)).To(Succeed())
		g.Expect(pe.InsertObject(ns)).To(Succeed())
	}
	// Pods that are not VMs: the infra cluster's own, CDI's and the
	// management cluster's. Only their namespaces and labels matter.
	others := []struct{ peer, ns, name, app string }{
		{"CAPI controllers", "capi-system", "capi-controller-manager", "cluster-api"},
		{"provider", providerNamespace, "capkv-controller-manager", "capkv"},
		{"infra DNS", "kube-system", "coredns", ""},
		{"OpenShift DNS", "openshift-dns", "dns-default-x7k2p", ""},
		{"infra pod", "kubevirt", "virt-api", "virt-api"},
		{"CDI importer", tenants["A"].ns, "importer-prime-golden", "containerized-data-importer"},
		{"CDI upload server", tenants["A"].ns, "cdi-upload-tmp-pvc", "containerized-data-importer"},
		{"CDI clone source", "golden-images", "clone-source-pod", "containerized-data-importer"},
		{"monitoring", "monitoring", "node-exporter-scraper", "prometheus"},
	}
	for i, o := range others {
		labels := map[string]string{"app": o.app}
		switch o.peer {
		case "infra DNS":
			labels = map[string]string{"k8s-app": "kube-dns"}
		case "OpenShift DNS":
			labels = map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}
		}
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: o.ns, Labels: labels},
			Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.244.9.%d", i+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.9.%d", i+1)}},
				HostIP: "192.0.2.1", HostIPs: []corev1.HostIP{{IP: "192.0.2.1"}}}}
		g.Expect(pe.InsertObject(pod)).To(Succeed())
		peers[o.peer] = o.ns + "/" + o.name
	}
	for _, ns := range []string{"capi-system", providerNamespace, "kube-system", "openshift-dns", "kubevirt", "golden-images", "monitoring"} {
		g.Expect(pe.InsertObject(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{corev1.LabelMetadataName: ns}}})).To(Succeed())
	}

	for _, f := range flowTable(t) {
		src, dst := peers[f.from], peers[f.to]
		g.Expect(src).NotTo(BeEmpty(), "unknown peer %q in docs/isolation.md", f.from)
		g.Expect(dst).NotTo(BeEmpty(), "unknown peer %q in docs/isolation.md", f.to)
		allowed, err := pe.CheckIfAllowed(src, dst, f.protocol, f.port)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(allowed).To(Equal(f.allowed), "%s -> %s %s/%s", f.from, f.to, f.protocol, f.port)
	}
}

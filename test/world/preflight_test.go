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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/preflight"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// finding returns the findings of one check with one reason.
func finding(r preflight.Report, check, reason string) []preflight.Finding {
	var out []preflight.Finding
	for _, f := range r.Findings {
		if f.Check == check && f.Reason == reason {
			out = append(out, f)
		}
	}
	return out
}

// TestPreflightFindings runs the preflight against the world's infra
// cluster as it is (real KubeVirt and CDI, KubeVirt's CR as its install
// leaves it), then against each change or shortcoming an infra cluster may
// have, made for real: the KubeVirt CR patched as docs/in-place-updates.md
// says, no load-balancer implementation, every StorageProfile copying, a
// DNS the isolation policies do not open; each is put back after.
func TestPreflightFindings(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := w.Env.Client
	disc, err := discovery.NewDiscoveryClientForConfig(w.Env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ns := namespace(t)
	opts := preflight.Options{ProbeNamespace: ns, ProbeLoadBalancer: true, ProbeTimeout: 20 * time.Second}
	run := func() preflight.Report { return preflight.Run(ctx, c, disc, opts) }
	// Polls leave the probe out: each would create a Service.
	passive := func() preflight.Report { return preflight.Run(ctx, c, disc, preflight.Options{}) }

	// As the world is: KubeVirt and CDI deployed with their versions,
	// clone by CSI (once CDI wrote its profiles), an address for the
	// probe, but no ReadWriteMany class.
	g.Eventually(func() []preflight.Finding { return finding(passive(), "storage", preflight.CloneMethodReason) }).
		WithTimeout(time.Minute).Should(ContainElement(HaveField("Message", ContainSubstring("csi-clone clones by csi-clone"))))
	r := run()
	g.Expect(r.Failed()).To(BeFalse(), "%+v", r.Findings)
	g.Expect(finding(r, "kubevirt", preflight.KubeVirtDeployedReason)).To(ConsistOf(HaveField("Message", ContainSubstring(testenv.KubeVirtVersion))))
	g.Expect(finding(r, "cdi", preflight.CDIDeployedReason)).To(ConsistOf(HaveField("Message", ContainSubstring(testenv.CDIVersion))))
	g.Expect(finding(r, "disk-growth", preflight.FeatureGateMissingReason)).To(ConsistOf(And(
		HaveField("Severity", preflight.Warning),
		HaveField("Message", ContainSubstring("lacks the ExpandDisks feature gate (spec.configuration.developerConfiguration.featureGates)")))))
	g.Expect(finding(r, "live-migration", preflight.LiveMigrateOffReason)).To(ConsistOf(HaveField("Severity", preflight.Warning)))
	g.Expect(finding(r, "load-balancer", preflight.LoadBalancerAvailableReason)).To(HaveLen(1))
	g.Expect(finding(r, "storage", preflight.CopyOnlyStorageReason)).To(BeEmpty())
	g.Expect(finding(r, "storage", preflight.CloneMethodReason)).To(ContainElement(And(
		HaveField("Severity", preflight.OK), HaveField("Message", ContainSubstring("csi-clone clones by csi-clone")))))
	g.Expect(finding(r, "live-migration", preflight.NoReadWriteManyReason)).To(ConsistOf(
		HaveField("Message", ContainSubstring("infra-node drains restart tenant machines"))))
	probes := &corev1.ServiceList{}
	g.Expect(c.List(ctx, probes, client.InNamespace(ns))).To(Succeed())
	g.Expect(probes.Items).To(BeEmpty(), "the probe Service outlived the preflight")

	t.Run("KubeVirt patched as the docs say", func(t *testing.T) {
		g := NewWithT(t)
		patchKubeVirt(t, c, testenv.ExpandDisksPatch, testenv.LiveMigrateUpdatesPatch)
		r := passive()
		g.Expect(finding(r, "disk-growth", preflight.FeatureGateOnReason)).To(HaveLen(1))
		g.Expect(finding(r, "live-migration", preflight.LiveMigrateOnReason)).To(HaveLen(1))
	})

	t.Run("no load-balancer implementation", func(t *testing.T) {
		g := NewWithT(t)
		w.Sim.SetLoadBalancer(false)
		t.Cleanup(func() { w.Sim.SetLoadBalancer(true) })
		o := opts
		o.ProbeTimeout = 5 * time.Second
		r := preflight.Run(ctx, c, disc, o)
		g.Expect(finding(r, "load-balancer", preflight.NoLoadBalancerReason)).To(ConsistOf(And(
			HaveField("Severity", preflight.Warning),
			HaveField("Message", And(ContainSubstring("got no address in 5s"), ContainSubstring("use the nodeport flavor"))))), "%+v", r.Findings)
	})

	t.Run("ReadWriteMany storage", func(t *testing.T) {
		g := NewWithT(t)
		restore := patchProfiles(t, func(p *cdiv1.StorageProfile) bool {
			if p.Name != "csi-clone" {
				return false
			}
			fs := corev1.PersistentVolumeFilesystem
			p.Spec.ClaimPropertySets = append(p.Spec.ClaimPropertySets, cdiv1.ClaimPropertySet{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &fs})
			return true
		})
		defer restore()
		g.Eventually(func() []preflight.Finding { return finding(passive(), "live-migration", preflight.ReadWriteManyReason) }).
			WithTimeout(30 * time.Second).Should(ConsistOf(HaveField("Message", HaveSuffix("on class csi-clone"))))
	})

	t.Run("copy-only storage", func(t *testing.T) {
		g := NewWithT(t)
		restore := patchProfiles(t, func(p *cdiv1.StorageProfile) bool {
			p.Spec.CloneStrategy = ptr.To(cdiv1.CloneStrategyHostAssisted)
			return true
		})
		defer restore()
		g.Eventually(func() []preflight.Finding { return finding(passive(), "storage", preflight.CopyOnlyStorageReason) }).
			WithTimeout(30 * time.Second).Should(ConsistOf(And(HaveField("Severity", preflight.Warning),
			HaveField("Message", ContainSubstring("no StorageClass clones by snapshot or CSI clone")))))
	})

	t.Run("DNS blocked", func(t *testing.T) {
		g := NewWithT(t)
		for name, app := range map[string]string{"kube-dns": "kube-dns", "coredns-chart": "coredns"} {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": app},
					Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
			g.Expect(c.Create(ctx, svc)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(ctx, svc) })
		}
		r := passive()
		g.Expect(finding(r, "dns", preflight.DNSOpenReason)).To(ConsistOf(HaveField("Message", ContainSubstring("kube-system/kube-dns"))))
		g.Expect(finding(r, "dns", preflight.DNSBlockedReason)).To(ConsistOf(And(HaveField("Severity", preflight.Warning),
			HaveField("Message", And(ContainSubstring("kube-system/coredns-chart selects pods labelled k8s-app=coredns"),
				ContainSubstring("spec.isolation.dnsResolvers"))))))
	})

	t.Run("at start, problems become Events on the manager's Pod", func(t *testing.T) {
		g := NewWithT(t)
		cs, err := kubernetes.NewForConfig(w.Env.Config)
		g.Expect(err).NotTo(HaveOccurred())
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
		stop := make(chan struct{})
		defer close(stop)
		broadcaster.StartRecordingToSink(stop)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capkv-controller-manager-0"}}
		check := &preflight.AtStart{Client: c, Discovery: disc, Recorder: broadcaster.NewRecorder(w.Env.Scheme, "preflight"), Pod: pod}
		g.Expect(check.Start(ctx)).To(Succeed())
		g.Eventually(func() []string {
			list := &eventsv1.EventList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil
			}
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == pod.Name && e.Type == corev1.EventTypeWarning {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).WithTimeout(30 * time.Second).Should(ContainElement(preflight.NoReadWriteManyReason))
	})
}

// patchProfiles changes the StorageProfiles change accepts and returns
// what puts them back, waiting until CDI reports each as before.
func patchProfiles(t *testing.T, change func(*cdiv1.StorageProfile) bool) func() {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	c := w.Env.Client
	list := &cdiv1.StorageProfileList{}
	g.Expect(c.List(ctx, list)).To(Succeed())
	var changed []cdiv1.StorageProfile
	for _, p := range list.Items {
		before := p.DeepCopy()
		if !change(&p) {
			continue
		}
		g.Expect(c.Patch(ctx, &p, client.MergeFrom(before))).To(Succeed())
		changed = append(changed, *before)
	}
	return func() {
		for _, before := range changed {
			current := &cdiv1.StorageProfile{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&before), current)).To(Succeed())
			current.Spec = before.Spec
			g.Expect(c.Update(ctx, current)).To(Succeed())
			g.Eventually(func() string {
				p := &cdiv1.StorageProfile{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(&before), p); err != nil {
					return err.Error()
				}
				return profileState(p)
			}).WithTimeout(30 * time.Second).Should(Equal(profileState(&before)))
		}
	}
}

// profileState is what CDI reports of a profile: its clone method and
// access modes.
func profileState(p *cdiv1.StorageProfile) string {
	modes := []string{string(ptr.Deref(p.Status.CloneStrategy, ""))}
	for _, set := range p.Status.ClaimPropertySets {
		for _, m := range set.AccessModes {
			modes = append(modes, string(m))
		}
	}
	return strings.Join(modes, " ")
}

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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// TestRealCDIImportsAndClones runs DataVolumes through CDI's own
// controllers and volume populators, the simulator playing only the pods
// they create and the CSI driver: a registry import (with the scratch
// space CDI asks for), a host-assisted clone of it, a CSI clone where the
// StorageProfile allows one, an import CDI restarts because its server
// cannot be reached, one into a claim too small for the image, and blank
// disks that wait for their first consumer.
func TestRealCDIImportsAndClones(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := w.Infra.Client
	ns := namespace(t)
	counted := map[string]int64{}
	for _, n := range []string{sim.Imports, sim.HostAssistedClones, sim.SmartClones} {
		counted[n] = w.Sim.Counters.Get(n)
	}
	since := func(n string) int64 { return w.Sim.Counters.Get(n) - counted[n] }
	get := func(dv *cdiv1.DataVolume) func() *cdiv1.DataVolume {
		return func() *cdiv1.DataVolume {
			got := &cdiv1.DataVolume{}
			_ = c.Get(ctx, client.ObjectKeyFromObject(dv), got)
			return got
		}
	}
	phaseOf := func(dv *cdiv1.DataVolume) func() cdiv1.DataVolumePhase {
		return func() cdiv1.DataVolumePhase { return get(dv)().Status.Phase }
	}

	image := "docker://quay.io/containerdisks/ubuntu:22.04"
	golden := dataVolume(ns, "golden", world.StandardClass, &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &image}})
	g.Expect(c.Create(ctx, golden)).To(Succeed())
	g.Eventually(phaseOf(golden), time.Minute).Should(Equal(cdiv1.Succeeded))
	g.Expect(contentOf(g, ns, "golden")).To(Equal(image))
	g.Expect(since(sim.Imports)).To(BeEquivalentTo(1))
	g.Eventually(func() []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		return pods.Items
	}, 30*time.Second).Should(BeEmpty(), "CDI deletes its importer once done")

	clone := dataVolume(ns, "clone", world.StandardClass, &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "golden"}})
	g.Expect(c.Create(ctx, clone)).To(Succeed())
	g.Eventually(phaseOf(clone), time.Minute).Should(Equal(cdiv1.Succeeded))
	g.Expect(contentOf(g, ns, "clone")).To(Equal(image))
	g.Expect(get(clone)().Annotations).To(HaveKeyWithValue("cdi.kubevirt.io/cloneType", "copy"),
		"without a VolumeSnapshotClass CDI copies")
	g.Expect(since(sim.HostAssistedClones)).To(BeEquivalentTo(1))

	smartGolden := dataVolume(ns, "smart-golden", world.CSICloneClass, golden.Spec.Source)
	smartClone := dataVolume(ns, "smart-clone", world.CSICloneClass, &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "smart-golden"}})
	g.Expect(c.Create(ctx, smartGolden)).To(Succeed())
	g.Expect(c.Create(ctx, smartClone)).To(Succeed())
	g.Eventually(phaseOf(smartClone), time.Minute).Should(Equal(cdiv1.Succeeded))
	g.Expect(contentOf(g, ns, "smart-clone")).To(Equal(image))
	g.Expect(get(smartClone)().Annotations).To(HaveKeyWithValue("cdi.kubevirt.io/cloneType", "csi-clone"))
	g.Expect(since(sim.SmartClones)).To(BeEquivalentTo(1))
	g.Expect(since(sim.Imports)).To(BeEquivalentTo(2))

	unreachable := dataVolume(ns, "unreachable", world.StandardClass,
		&cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://" + sim.FailUnreachable + ".example/disk.qcow2"}})
	g.Expect(c.Create(ctx, unreachable)).To(Succeed())
	g.Eventually(func() int32 { return get(unreachable)().Status.RestartCount }, time.Minute).Should(BeNumerically(">=", 2))
	conditionOf := func(dv *cdiv1.DataVolume, t cdiv1.DataVolumeConditionType) cdiv1.DataVolumeCondition {
		for _, cond := range get(dv)().Status.Conditions {
			if cond.Type == t {
				return cond
			}
		}
		return cdiv1.DataVolumeCondition{}
	}
	g.Eventually(func() cdiv1.DataVolumeCondition { return conditionOf(unreachable, cdiv1.DataVolumeRunning) }, 30*time.Second).Should(And(
		HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "Error"),
		HaveField("Message", ContainSubstring("Unable to connect to http data source"))))
	g.Expect(get(unreachable)().Status.Phase).NotTo(Equal(cdiv1.Succeeded))
	// CDI restarts a failing importer without end, and each restart costs
	// its controller writes under its client rate limit: on a loaded
	// machine that backlog kept the last DataVolume below without a phase
	// for a minute. Checked, the failing imports go.
	g.Expect(c.Delete(ctx, unreachable)).To(Succeed())

	tooSmall := dataVolume(ns, "too-small", world.StandardClass, golden.Spec.Source)
	tooSmall.Spec.Storage.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
	g.Expect(c.Create(ctx, tooSmall)).To(Succeed())
	g.Eventually(func() cdiv1.DataVolumeCondition { return conditionOf(tooSmall, cdiv1.DataVolumeRunning) }, time.Minute).Should(And(
		HaveField("Status", corev1.ConditionFalse), HaveField("Message", "DataVolume too small to contain image")),
		"CDI's words for the importer's out-of-space error")
	g.Expect(c.Delete(ctx, tooSmall)).To(Succeed())

	waiting := dataVolume(ns, "wffc", world.WFFCClass, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}})
	g.Expect(c.Create(ctx, waiting)).To(Succeed())
	// A claim CDI's populators fill waits, as PendingPopulation, for
	// the scheduler to pick its consumer's node.
	g.Eventually(phaseOf(waiting), 30*time.Second).Should(Equal(cdiv1.PendingPopulation))
	g.Consistently(phaseOf(waiting), 2*time.Second).Should(Equal(cdiv1.PendingPopulation))
	immediate := dataVolume(ns, "wffc-immediate", world.WFFCClass, &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}})
	immediate.Annotations = map[string]string{"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}
	g.Expect(c.Create(ctx, immediate)).To(Succeed())
	g.Eventually(phaseOf(immediate), time.Minute).Should(Equal(cdiv1.Succeeded))
	g.Expect(contentOf(g, ns, "wffc-immediate")).To(Equal("blank"))
}

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

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// TestRealCDIClonesBySnapshot runs a clone on the snapshot-capable class
// through CDI's own clone populator: CDI picks a snapshot because the
// driver has a VolumeSnapshotClass, restores it, and deletes the snapshot
// (and so its content) once the clone is done.
func TestRealCDIClonesBySnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := w.Infra.Client
	ns := namespace(t)
	snapshots, smart := w.Sim.Counters.Get(sim.Snapshots), w.Sim.Counters.Get(sim.SmartClones)

	image := "docker://quay.io/containerdisks/fedora:42"
	golden := dataVolume(ns, "golden", world.SnapshotClass, &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &image}})
	clone := dataVolume(ns, "clone", world.SnapshotClass, &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "golden"}})
	g.Expect(c.Create(ctx, golden)).To(Succeed())
	g.Expect(c.Create(ctx, clone)).To(Succeed())
	g.Eventually(dvPhase(g, clone), time.Minute).Should(Equal(cdiv1.Succeeded))
	got := &cdiv1.DataVolume{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(clone), got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue("cdi.kubevirt.io/cloneType", "snapshot"))
	g.Expect(contentOf(g, ns, "clone")).To(Equal(image))
	g.Expect(w.Sim.Counters.Get(sim.Snapshots) - snapshots).To(BeEquivalentTo(1))
	g.Expect(w.Sim.Counters.Get(sim.SmartClones) - smart).To(BeEquivalentTo(1))

	g.Eventually(func() []snapshotv1.VolumeSnapshot {
		list := &snapshotv1.VolumeSnapshotList{}
		g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}, 30*time.Second).Should(BeEmpty(), "CDI deletes its snapshot once the clone is done")
	g.Eventually(func() []string { return contentsOf(g, ns) }, 30*time.Second).Should(BeEmpty(),
		"the Delete policy takes the content with it")
}

// TestSnapshotterIsAsStrictAsCSI checks the simulated snapshot-controller,
// csi-snapshotter and external-provisioner refuse what upstream refuses:
// two sources, a claim that is not there, a volume of another driver, a
// restore smaller than the snapshot; and that a snapshot being restored
// from outlives its deletion until the restore is done.
func TestSnapshotterIsAsStrictAsCSI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := w.Infra.Client
	ns := namespace(t)
	snapshotOf := func(name, claim string) *snapshotv1.VolumeSnapshot {
		return &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim)},
				VolumeSnapshotClassName: ptr.To(world.SnapshotClass)}}
	}
	status := func(vs *snapshotv1.VolumeSnapshot) func() snapshotv1.VolumeSnapshotStatus {
		return func() snapshotv1.VolumeSnapshotStatus {
			got := &snapshotv1.VolumeSnapshot{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(vs), got)).To(Succeed())
			return ptr.Deref(got.Status, snapshotv1.VolumeSnapshotStatus{})
		}
	}
	errorOf := func(s snapshotv1.VolumeSnapshotStatus) string {
		if s.Error == nil {
			return ""
		}
		return ptr.Deref(s.Error.Message, "")
	}
	claim := func(name, class, size string, source *corev1.TypedObjectReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), DataSourceRef: source,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	phase := func(pvc *corev1.PersistentVolumeClaim) func() corev1.PersistentVolumeClaimPhase {
		return func() corev1.PersistentVolumeClaimPhase {
			got := &corev1.PersistentVolumeClaim{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pvc), got)).To(Succeed())
			return got.Status.Phase
		}
	}

	both := snapshotOf("both", "data")
	both.Spec.Source.VolumeSnapshotContentName = ptr.To("some-content")
	g.Expect(c.Create(ctx, both)).To(MatchError(ContainSubstring("exactly one of spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName")))

	missing := snapshotOf("missing", "no-such-claim")
	g.Expect(c.Create(ctx, missing)).To(Succeed())
	g.Eventually(func() string { return errorOf(status(missing)()) }, 30*time.Second).Should(ContainSubstring(`"no-such-claim" not found`))
	g.Expect(status(missing)().ReadyToUse).To(HaveValue(BeFalse()))

	// A volume of the driver without snapshots cannot be taken by the
	// other driver's class.
	other := claim("other-driver", world.StandardClass, "1Gi", nil)
	g.Expect(c.Create(ctx, other)).To(Succeed())
	g.Eventually(phase(other), 30*time.Second).Should(Equal(corev1.ClaimBound))
	mismatch := snapshotOf("mismatch", other.Name)
	g.Expect(c.Create(ctx, mismatch)).To(Succeed())
	g.Eventually(func() string { return errorOf(status(mismatch)()) }, 30*time.Second).Should(
		ContainSubstring("is for driver " + world.SnapshotProvisioner + ", the volume's driver is " + world.Provisioner))

	data := claim("data", world.SnapshotClass, "2Gi", nil)
	g.Expect(c.Create(ctx, data)).To(Succeed())
	taken := snapshotOf("taken", data.Name)
	g.Expect(c.Create(ctx, taken)).To(Succeed())
	g.Eventually(status(taken), 30*time.Second).Should(And(
		HaveField("ReadyToUse", HaveValue(BeTrue())), HaveField("RestoreSize", HaveValue(Equal(resource.MustParse("2Gi")))),
		HaveField("BoundVolumeSnapshotContentName", Not(BeNil()))), "taken once its claim binds")

	fromTaken := &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: taken.Name}
	tooSmall := claim("too-small", world.SnapshotClass, "1Gi", fromTaken)
	g.Expect(c.Create(ctx, tooSmall)).To(Succeed())
	g.Eventually(func() []string { return warnings(g, ns, tooSmall.Name) }, 30*time.Second).Should(
		ContainElement(ContainSubstring("requested volume size 1073741824 is less than the size 2147483648 for the source snapshot taken")))
	g.Expect(phase(tooSmall)()).To(Equal(corev1.ClaimPending))

	// The snapshot outlives its deletion while a claim is restored from
	// it, and goes, with its content, once none is.
	g.Expect(c.Delete(ctx, taken)).To(Succeed())
	g.Consistently(func() error { return c.Get(ctx, client.ObjectKeyFromObject(taken), &snapshotv1.VolumeSnapshot{}) }, 2*time.Second).Should(Succeed())
	g.Expect(c.Delete(ctx, tooSmall)).To(Succeed())
	g.Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(taken), &snapshotv1.VolumeSnapshot{}) }, 30*time.Second).Should(
		MatchError(ContainSubstring("not found")))
	g.Eventually(func() []string { return contentsOf(g, ns) }, 30*time.Second).Should(BeEmpty(),
		"snapshots that were never taken have no content")
}

// contentOf is what the volume bound to a claim holds. CDI calls a
// DataVolume Succeeded once its populator copied the pod's phase to the
// claim, which can be just before the volume is rebound from the
// populator's prime claim, so it waits for the claim's volume.
func contentOf(g Gomega, ns, name string) string {
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	g.Eventually(func() string {
		g.Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
		return pvc.Spec.VolumeName
	}, 30*time.Second).ShouldNot(BeEmpty())
	pv := &corev1.PersistentVolume{}
	g.Expect(w.Infra.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
	return pv.Annotations[sim.ContentAnnotation]
}

// contentsOf names the VolumeSnapshotContents of a namespace's snapshots.
func contentsOf(g Gomega, ns string) []string {
	list := &snapshotv1.VolumeSnapshotContentList{}
	g.Expect(w.Infra.Client.List(context.Background(), list)).To(Succeed())
	var names []string
	for _, c := range list.Items {
		if c.Spec.VolumeSnapshotRef.Namespace == ns {
			names = append(names, c.Name)
		}
	}
	return names
}

// warnings are the messages of a namespace's Warning Events about name.
func warnings(g Gomega, ns, name string) []string {
	list := &corev1.EventList{}
	g.Expect(w.Infra.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var messages []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == name {
			messages = append(messages, e.Message)
		}
	}
	return messages
}

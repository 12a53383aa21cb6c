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
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/suite"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

var _ = Describe("In-place updates", func() {
	ctx := context.Background()
	BeforeEach(func() {
		if w == nil {
			Skip("needs the sandbox world, whose Cluster API runs with RuntimeSDK and InPlaceUpdates")
		}
	})

	It("grow the control plane's and the workers' VMs without replacing them, one control-plane machine at a time, and roll what they cannot change", func() {
		const name = "grow"
		registerInPlaceExtension(ctx)
		turnOnKubeVirtInPlace(ctx)
		ns := newNamespace(ctx, "e2e-inplace-")
		prepareFlavor(ctx, "multus", ns)
		out, err := cc.RunWithVariables(ctx, nil, "generate", "cluster", name, "--infrastructure", "kubevirt:"+suite.ReleaseVersion, "-n", ns,
			"--flavor", "multus", "--control-plane-machine-count", "3", "--worker-machine-count", "2")
		Expect(err).NotTo(HaveOccurred())
		Expect(world.ApplyYAMLWith(ctx, c, []byte(out), growableCluster)).To(Succeed())
		expectRunning(ctx, ns, name)
		expectMachinesWithNodes(ctx, ns, 5)
		workers, controlPlane := workerState(ctx, ns), machineState(ctx, ns, clusterv1.MachineControlPlaneLabel)
		Expect(workers).To(HaveLen(2))
		Expect(controlPlane).To(HaveLen(3))
		machinesBefore := machineUIDs(ctx, ns)
		watched := watchMachines(ctx, ns)

		By("the control plane's and the workers' templates ask for 4 CPU sockets, 8Gi and a 30Gi root disk instead of 2, 4Gi and 20Gi")
		for _, m := range workers {
			Expect(m.rootClaim.Cmp(grownDisk)).To(BeNumerically("<", 0), "the root disk's claim is smaller than %s before", grownDisk.String())
		}
		rollWorkers(ctx, ns, name+"-md-0", "grown", grow)
		rollControlPlane(ctx, ns, name+"-control-plane", "grown", grow)
		expectGrownInPlace(ctx, ns, clusterv1.MachineDeploymentNameLabel, workers, machinesBefore, watched)
		expectGrownInPlace(ctx, ns, clusterv1.MachineControlPlaneLabel, controlPlane, machinesBefore, watched)
		Expect(watched().mostControlPlaneUpdating).To(Equal(1),
			"KubeadmControlPlane updates one member at a time, so etcd keeps its quorum (and every guest kept running)")

		By("a new image cannot change in place: Cluster API replaces the workers")
		grown := machineUIDs(ctx, ns)
		rollWorkers(ctx, ns, name+"-md-0", "jammy", func(spec *infrav1.KubevirtMachineSpec) {
			image := spec.RootDisk.Image.Registry
			image.URL = strings.Replace(image.URL, "ubuntu-2404-container-disk", "ubuntu-2204-container-disk", 1)
		})
		Eventually(func(g Gomega) string {
			machines := &clusterv1.MachineList{}
			g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name + "-md-0"})).To(Succeed())
			replaced, withNode := 0, 0
			for _, m := range machines.Items {
				if !grown[m.UID] {
					replaced++
				}
				if m.Status.NodeRef.IsDefined() && m.DeletionTimestamp.IsZero() {
					withNode++
				}
			}
			return fmt.Sprintf("%d workers, %d new, %d with a Node", len(machines.Items), replaced, withNode)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal("2 workers, 2 new, 2 with a Node"), func() string { return describe(ctx, ns) })
		deleteClusterLater(ctx, ns, name)
	})
})

// grownDisk is the root disk size grow asks for.
var grownDisk = resource.MustParse("30Gi")

// grow asks for 4 CPU sockets, 8Gi of guest memory and a larger root
// disk.
func grow(spec *infrav1.KubevirtMachineSpec) {
	d := &spec.VirtualMachineTemplate.Spec.Template.Spec.Domain
	d.CPU.Sockets = 4
	d.Memory.Guest = ptr.To(resource.MustParse("8Gi"))
	spec.RootDisk.DiskSize = grownDisk
}

// expectGrownInPlace waits until the machines with label, read before
// the update, run with 4 sockets, 8Gi and a root disk claim of 30Gi in
// the same Machines, VMs,
// instances and Nodes, done updating, and no Machine came and went.
func expectGrownInPlace(ctx context.Context, ns, label string, before map[string]worker, machines map[types.UID]bool, watched func() watchedMachines) {
	Eventually(func(g Gomega) {
		g.Expect(machineUIDs(ctx, ns)).To(Equal(machines), "no Machine is created or deleted")
		after := machineState(ctx, ns, label)
		g.Expect(after).To(HaveLen(len(before)))
		for machine, was := range before {
			now := after[machine]
			g.Expect(now.vm).To(Equal(was.vm), "machine %s keeps its VM", machine)
			g.Expect(now.vmi).To(Equal(was.vmi), "machine %s's guest was not restarted", machine)
			g.Expect(now.node).To(Equal(was.node), "machine %s keeps its Node", machine)
			g.Expect(now.size).To(Equal("4 sockets, 8Gi"), "the guest of machine %s sees the new size", machine)
			g.Expect(now.rootClaim.Cmp(grownDisk)).To(BeNumerically(">=", 0), "the root disk's claim of machine %s grew to hold %s", machine, grownDisk.String())
			g.Expect(now.updated).To(HavePrefix("True"), "machine %s", machine)
			g.Expect(now.upToDate).To(BeTrue(), "machine %s is up to date and no longer updating", machine)
		}
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), func() string { return describe(ctx, ns) + hotplugDiagnostics(ctx, ns) })
	Expect(watched().seen).To(Equal(machines), "no Machine came and went during the update")
}

// watchedMachines is what watchMachines saw.
type watchedMachines struct {
	// seen is every Machine UID.
	seen map[types.UID]bool
	// mostControlPlaneUpdating is the most control-plane Machines seen
	// being updated in place at once.
	mostControlPlaneUpdating int
}

// watchMachines polls the namespace's Machines until the spec ends; the
// returned func gives what it saw, so that a Machine created and deleted
// in between counts.
func watchMachines(ctx context.Context, ns string) func() watchedMachines {
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	var mu sync.Mutex
	w := watchedMachines{seen: map[types.UID]bool{}}
	go func() {
		for ctx.Err() == nil {
			machines := &clusterv1.MachineList{}
			if err := c.List(ctx, machines, client.InNamespace(ns)); err == nil {
				mu.Lock()
				updating := 0
				for _, m := range machines.Items {
					w.seen[m.UID] = true
					if _, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]; ok && util.IsControlPlaneMachine(&m) {
						updating++
					}
				}
				w.mostControlPlaneUpdating = max(w.mostControlPlaneUpdating, updating)
				mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() watchedMachines {
		mu.Lock()
		defer mu.Unlock()
		return watchedMachines{seen: maps.Clone(w.seen), mostControlPlaneUpdating: w.mostControlPlaneUpdating}
	}
}

// registerInPlaceExtension applies the release's in-place-updates.yaml, as
// docs/in-place-updates.md says, and waits until Cluster API discovered
// the extension's three hooks; the spec removes it when it ends, so other
// specs' rollouts stay as they were.
func registerInPlaceExtension(ctx context.Context) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "out", "in-place-updates.yaml"))
	Expect(err).NotTo(HaveOccurred(), "make release-manifests writes it")
	Expect(world.ApplyYAML(ctx, c, raw)).To(Succeed())
	ext := &runtimev1.ExtensionConfig{}
	DeferCleanup(func() {
		Expect(c.Delete(context.Background(), &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "capkv-in-place-updates"}})).To(Succeed())
	})
	Eventually(func(g Gomega) []string {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "capkv-in-place-updates"}, ext)).To(Succeed())
		g.Expect(conditions.IsTrue(ext, runtimev1.ExtensionConfigDiscoveredCondition)).To(BeTrue(), "%v", ext.Status.Conditions)
		var hooks []string
		for _, h := range ext.Status.Handlers {
			hooks = append(hooks, h.RequestHook.Hook)
		}
		slices.Sort(hooks)
		return hooks
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal([]string{"CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"}))
}

// turnOnKubeVirtInPlace patches the infra cluster's KubeVirt CR, which
// starts as KubeVirt's install leaves it, with the two patches
// docs/in-place-updates.md gives: LiveMigrate among the workload update
// methods (CPU and memory) and the ExpandDisks gate (disks). The spec puts
// them back when it ends.
func turnOnKubeVirtInPlace(ctx context.Context) {
	restore, err := testenv.PatchKubeVirt(ctx, c, testenv.LiveMigrateUpdatesPatch, testenv.ExpandDisksPatch)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(restore(context.Background())).To(Succeed()) })
}

// growableCluster edits the generated multus cluster as a platform with
// shared storage would have it: a ReadWriteMany root disk, so that
// KubeVirt can live-migrate the VMs (the multus layout binds the pod
// network with masquerade and keeps each node's VLAN address), one failure
// domain spanning every infra node, so that a control-plane VM has other
// nodes to move to, and machines updated one at a time without a surge
// Machine. The headroom, 2 of up to 8 sockets and 4Gi of up to 16Gi, is
// the flavor's default.
func growableCluster(u *unstructured.Unstructured) error {
	switch u.GetKind() {
	case "KubevirtMachineTemplate":
		return unstructured.SetNestedStringSlice(u.Object, []string{"ReadWriteMany"}, "spec", "template", "spec", "rootDisk", "accessModes")
	case "KubevirtCluster":
		return unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "rack-1",
			"nodeSelector": map[string]any{kubevirtv1.NodeSchedulable: "true"}}}, "spec", "failureDomains")
	case "MachineDeployment":
		return unstructured.SetNestedMap(u.Object, map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}}, "spec", "rollout", "strategy")
	case "KubeadmControlPlane":
		// KubeadmControlPlane takes no maxUnavailable.
		return unstructured.SetNestedMap(u.Object, map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(0)}}, "spec", "rollout", "strategy")
	}
	return nil
}

// rollWorkers gives a MachineDeployment a copy of its KubevirtMachineTemplate
// changed by change (copyTemplate), as a user changes machines.
func rollWorkers(ctx context.Context, ns, md, suffix string, change func(*infrav1.KubevirtMachineSpec)) {
	deployment := &clusterv1.MachineDeployment{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, deployment)).To(Succeed())
	next := copyTemplate(ctx, ns, deployment.Spec.Template.Spec.InfrastructureRef.Name, suffix, change)
	Expect(retryWrite(func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(deployment), deployment); err != nil {
			return err
		}
		deployment.Spec.Template.Spec.InfrastructureRef.Name = next
		return c.Update(ctx, deployment)
	})).To(Succeed())
}

// rollControlPlane gives a KubeadmControlPlane a copy of its
// KubevirtMachineTemplate changed by change, as rollWorkers does.
func rollControlPlane(ctx context.Context, ns, kcpName, suffix string, change func(*infrav1.KubevirtMachineSpec)) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kcpName}, kcp)).To(Succeed())
	next := copyTemplate(ctx, ns, kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name, suffix, change)
	Expect(retryWrite(func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), kcp); err != nil {
			return err
		}
		kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = next
		return c.Update(ctx, kcp)
	})).To(Succeed())
}

// copyTemplate creates a copy of a KubevirtMachineTemplate named
// <name>-<suffix>, changed by change (templates are immutable), and
// returns its name.
func copyTemplate(ctx context.Context, ns, name, suffix string, change func(*infrav1.KubevirtMachineSpec)) string {
	tmpl := &infrav1.KubevirtMachineTemplate{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tmpl)).To(Succeed())
	next := &infrav1.KubevirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + suffix}, Spec: *tmpl.Spec.DeepCopy()}
	change(&next.Spec.Template.Spec)
	Expect(c.Create(ctx, next)).To(Succeed())
	return next.Name
}

// worker is what an in-place update must keep, and what it changes, of one
// worker machine.
type worker struct {
	vm, vmi  types.UID
	node     string
	size     string
	updated  string
	upToDate bool
	// rootClaim is the capacity of the root disk's claim, as KubeVirt
	// reports it for the instance.
	rootClaim resource.Quantity
}

// workerState reads the workers by Machine name (machineState).
func workerState(ctx context.Context, ns string) map[string]worker {
	return machineState(ctx, ns, clusterv1.MachineDeploymentNameLabel)
}

// machineState reads the Machines with label by name: their VM and
// instance UIDs, Node, the size the guest runs with, InPlaceUpdated, and
// whether Cluster API sees them up to date and done updating.
func machineState(ctx context.Context, ns, label string) map[string]worker {
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(ns), client.HasLabels{label})).To(Succeed())
	out := map[string]worker{}
	for _, m := range machines.Items {
		km := &infrav1.KubevirtMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, km); err != nil {
			continue
		}
		wk := worker{node: m.Status.NodeRef.Name,
			upToDate: conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition) && !conditions.IsTrue(&m, clusterv1.MachineUpdatingCondition)}
		if cond := conditions.Get(km, infrav1.InPlaceUpdatedCondition); cond != nil {
			wk.updated = fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		vm, vmi := &kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vm) == nil {
			wk.vm = vm.UID
		}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: km.Name}, vmi) == nil {
			wk.vmi = vmi.UID
			if t, mem := vmi.Status.CurrentCPUTopology, vmi.Status.Memory; t != nil && mem != nil && mem.GuestRequested != nil {
				wk.size = fmt.Sprintf("%d sockets, %s", t.Sockets, mem.GuestRequested.String())
			}
			for _, vs := range vmi.Status.VolumeStatus {
				if vs.Name == "rootdisk" && vs.PersistentVolumeClaimInfo != nil {
					wk.rootClaim = vs.PersistentVolumeClaimInfo.Capacity[corev1.ResourceStorage]
				}
			}
		}
		out[m.Name] = wk
	}
	return out
}

// hotplugDiagnostics lists, for a failure message, what KubeVirt did with
// a hot-plug: the instances' CPU, memory and conditions, the migrations,
// and the launcher pods not running.
func hotplugDiagnostics(ctx context.Context, ns string) string {
	var b strings.Builder
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	_ = c.List(ctx, vmis, client.InNamespace(ns))
	for _, vmi := range vmis.Items {
		fmt.Fprintf(&b, "VMI %s sockets spec %v current %v memory %v migration %+v\n", vmi.Name, vmi.Spec.Domain.CPU, vmi.Status.CurrentCPUTopology, vmi.Status.Memory, vmi.Status.MigrationState)
		for _, cond := range vmi.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, vs := range vmi.Status.VolumeStatus {
			if claim := vs.PersistentVolumeClaimInfo; claim != nil {
				fmt.Fprintf(&b, "  volume %s claim %s requests %v capacity %v\n", vs.Name, claim.ClaimName, claim.Requests, claim.Capacity)
			}
		}
	}
	vms := &kubevirtv1.VirtualMachineList{}
	_ = c.List(ctx, vms, client.InNamespace(ns))
	for _, vm := range vms.Items {
		for _, cond := range vm.Status.Conditions {
			fmt.Fprintf(&b, "VM %s %s=%s %s %s\n", vm.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	migs := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	_ = c.List(ctx, migs, client.InNamespace(ns))
	for _, m := range migs.Items {
		fmt.Fprintf(&b, "migration %s of %s: %s %v\n", m.Name, m.Spec.VMIName, m.Status.Phase, m.Status.Conditions)
	}
	pods := &corev1.PodList{}
	_ = c.List(ctx, pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			fmt.Fprintf(&b, "pod %s %s %v\n", p.Name, p.Status.Phase, p.Status.Conditions)
		}
	}
	return b.String()
}

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
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// TestMachinePoolMachines gives each VM of a pool its KubevirtMachine and
// drives them through Machines made as Cluster API's MachinePool
// controller makes them: the machines provision on the pool's VMs; a
// scale-down removes the Machine marked for deletion and then the highest
// index, and no other VM; deleting one Machine deletes its VM, and the
// pool makes a new one only once the old Machine is gone; a template
// change replaces every instance through its Machine.
func TestMachinePoolMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	mp, p, err := tc.NewMachinePool(ctx, fixture.MachinePoolOptions{Name: "mpm", Replicas: 3})
	g.Expect(err).NotTo(HaveOccurred())
	infra := w.Env.Client
	owner := metav1.NewControllerRef(mp, clusterv1.GroupVersion.WithKind("MachinePool"))

	// vms lists the pool's live VMs by name, with their UIDs.
	vms := func() map[string]types.UID {
		list := &kubevirtv1.VirtualMachineList{}
		g.Expect(infra.List(ctx, list, client.InNamespace(tc.ns), client.MatchingLabels{infrav1.KubevirtMachinePoolLabel: p.Name})).To(Succeed())
		out := map[string]types.UID{}
		for _, vm := range list.Items {
			if vm.DeletionTimestamp.IsZero() {
				out[vm.Name] = vm.UID
			}
		}
		return out
	}
	// machines plays Cluster API: a Machine for each KubevirtMachine of the
	// pool, and the KubevirtMachine owned by it. It returns the names of
	// the provisioned KubevirtMachines whose VM is the pool's current one.
	machines := func() ([]string, error) {
		kms := &infrav1.KubevirtMachineList{}
		if err := tc.c.List(ctx, kms, client.InNamespace(tc.ns), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
			return nil, err
		}
		current := vms()
		// Cluster API's Machine controller: a deleted Machine deletes its
		// KubevirtMachine and goes once that is gone.
		ms := &clusterv1.MachineList{}
		if err := tc.c.List(ctx, ms, client.InNamespace(tc.ns)); err != nil {
			return nil, err
		}
		for i := range ms.Items {
			m := &ms.Items[i]
			if m.DeletionTimestamp.IsZero() {
				continue
			}
			km := &infrav1.KubevirtMachine{}
			err := tc.c.Get(ctx, client.ObjectKeyFromObject(m), km)
			switch {
			case err == nil && km.DeletionTimestamp.IsZero():
				err = tc.c.Delete(ctx, km)
			case apierrors.IsNotFound(err):
				patched := m.DeepCopy()
				patched.Finalizers = nil
				err = tc.c.Patch(ctx, patched, client.MergeFrom(m))
			}
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
		}
		var ready []string
		for i := range kms.Items {
			km := &kms.Items[i]
			if !km.DeletionTimestamp.IsZero() {
				continue
			}
			if ptr.Deref(km.Status.Initialization.Provisioned, false) && current[km.Name] == types.UID(km.Annotations[infrav1.PoolVMUIDAnnotation]) {
				ready = append(ready, km.Name)
			}
			if metav1.GetControllerOf(km) != nil {
				// Its Machine exists, or existed: a Machine outlives its
				// KubevirtMachine in Cluster API, so none is made again.
				continue
			}
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: km.Name, Namespace: tc.ns, Finalizers: []string{"test.capkv.io/machine"},
				Labels:          map[string]string{clusterv1.ClusterNameLabel: fixture.ClusterName, clusterv1.MachinePoolNameLabel: mp.Name},
				OwnerReferences: []metav1.OwnerReference{*owner}},
				Spec: clusterv1.MachineSpec{ClusterName: fixture.ClusterName, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtMachine", Name: km.Name}}}
			if err := tc.c.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, err
			}
			if err := tc.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return nil, err
			}
			patched := km.DeepCopy()
			patched.OwnerReferences = append(patched.OwnerReferences, *metav1.NewControllerRef(m, clusterv1.GroupVersion.WithKind("Machine")))
			if err := tc.c.Patch(ctx, patched, client.MergeFrom(km)); err != nil {
				return nil, err
			}
		}
		slices.Sort(ready)
		return ready, nil
	}
	provisioned := func(names ...string) func() error {
		return func() error {
			ready, err := machines()
			if err != nil {
				return err
			}
			if !slices.Equal(ready, names) {
				return fmt.Errorf("provisioned %v, want %v; VMs %v", ready, names, vms())
			}
			return nil
		}
	}
	setReplicas := func(n int32) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := get(t, tc.c, &clusterv1.MachinePool{ObjectMeta: mp.ObjectMeta})
			cur.Spec.Replicas = ptr.To(n)
			return tc.c.Update(ctx, cur)
		})).To(Succeed())
	}

	eventually(t, provisioned("mpm-0", "mpm-1", "mpm-2")).Should(Succeed())
	cur := get(t, tc.c, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta})
	g.Expect(cur.Status.InfrastructureMachineKind).To(Equal("KubevirtMachine"))
	km := get(t, tc.c, &infrav1.KubevirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "mpm-1"}})
	first := vms()
	g.Expect(km.Annotations).To(HaveKeyWithValue(infrav1.PoolVMUIDAnnotation, string(first["mpm-1"])))
	g.Expect(km.Spec.ProviderID).To(Equal(ptr.To(infrav1.ProviderIDPrefix + "mpm-1")))
	g.Expect(km.OwnerReferences).To(ContainElement(HaveField("UID", p.UID)))

	// Scale 3 -> 1 with mpm-0 marked: mpm-0 and then the highest index go.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "mpm-0"}})
		m.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
		return tc.c.Update(ctx, m)
	})).To(Succeed())
	setReplicas(1)
	defer func() {
		if t.Failed() {
			evs := &corev1.EventList{}
			_ = tc.c.List(ctx, evs, client.InNamespace(tc.ns))
			for _, e := range evs.Items {
				t.Logf("%s %s/%s %s: %s", e.CreationTimestamp.Format("15:04:05"), e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
			}
		}
	}()
	eventually(t, func() (map[string]types.UID, error) {
		_, err := machines()
		return vms(), err
	}).Should(Equal(map[string]types.UID{"mpm-1": first["mpm-1"]}))
	eventually(t, provisioned("mpm-1")).Should(Succeed())
	g.Consistently(vms, "2s").Should(Equal(map[string]types.UID{"mpm-1": first["mpm-1"]}), "no VM comes back")

	// Deleting the Machine replaces the instance: the pool makes mpm-0.
	g.Expect(tc.c.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "mpm-1"}})).To(Succeed())
	eventually(t, provisioned("mpm-0")).Should(Succeed())
	g.Expect(vms()).To(HaveLen(1))

	// A MachineHealthCheck marks the Machine for its owner to remediate:
	// the pool, as the owner, deletes it and a new instance replaces it.
	replaced := vms()["mpm-0"]
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "mpm-0"}})
		m.Status.Conditions = append(m.Status.Conditions,
			metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: "UnhealthyNode", LastTransitionTime: metav1.Now()},
			metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation", LastTransitionTime: metav1.Now()})
		return tc.c.Status().Update(ctx, m)
	})).To(Succeed())
	eventually(t, func() (types.UID, error) {
		_, err := machines()
		return vms()["mpm-0"], err
	}).ShouldNot(Or(BeEmpty(), Equal(replaced)))
	eventually(t, provisioned("mpm-0")).Should(Succeed())

	// A pool VM deleted behind the provider's back: its Machine is deleted
	// and the pool replaces the instance.
	replaced = vms()["mpm-0"]
	g.Expect(infra.Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "mpm-0"}})).To(Succeed())
	eventually(t, func() (types.UID, error) {
		_, err := machines()
		return vms()["mpm-0"], err
	}).ShouldNot(Or(BeEmpty(), Equal(replaced)))
	eventually(t, provisioned("mpm-0")).Should(Succeed())

	// Scale to 2, then change the template: both instances are replaced.
	setReplicas(2)
	eventually(t, provisioned("mpm-0", "mpm-1")).Should(Succeed())
	before := vms()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, tc.c, &infrav1.KubevirtMachinePool{ObjectMeta: p.ObjectMeta})
		cur.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"team": "blue"}
		return tc.c.Update(ctx, cur)
	})).To(Succeed())
	eventually(t, func() error {
		if err := provisioned("mpm-0", "mpm-1")(); err != nil {
			return err
		}
		for name, uid := range vms() {
			vm := &kubevirtv1.VirtualMachine{}
			if err := infraGet(t, infra, tc.ns, name, vm); err != nil {
				return err
			}
			if vm.UID == before[name] || vm.Labels["team"] != "blue" {
				return fmt.Errorf("VM %s (%s) not replaced yet", name, uid)
			}
		}
		return nil
	}).WithTimeout(120 * 1e9).Should(Succeed())
}

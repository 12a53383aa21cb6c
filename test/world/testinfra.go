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

package world

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The test-only infrastructure provider (see test/crdsrc/worldinfra).
var (
	worldClusterGVK = schema.GroupVersionKind{Group: "infrastructure.world.capkv.io", Version: "v1alpha1", Kind: "WorldCluster"}
	worldMachineGVK = schema.GroupVersionKind{Group: "infrastructure.world.capkv.io", Version: "v1alpha1", Kind: "WorldMachine"}
)

const worldFinalizer = "world.capkv.io/infra"

// testInfra reconciles WorldClusters and WorldMachines against the in-memory
// workload clusters.
type testInfra struct {
	client    client.Client
	workloads *Workloads
}

func (t *testInfra) setup(mgr ctrl.Manager) error {
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(worldClusterGVK)
	if err := ctrl.NewControllerManagedBy(mgr).Named("world-cluster").For(cluster).Complete(reconcile.Func(t.reconcileCluster)); err != nil {
		return err
	}
	machine := &unstructured.Unstructured{}
	machine.SetGroupVersionKind(worldMachineGVK)
	return ctrl.NewControllerManagedBy(mgr).Named("world-machine").For(machine).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineOwnerMap)).
		Complete(reconcile.Func(t.reconcileMachine))
}

func (t *testInfra) get(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, t.client.Get(ctx, key, u)
}

func ownerName(u *unstructured.Unstructured, kind string) string {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == kind {
			return ref.Name
		}
	}
	return ""
}

func (t *testInfra) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	u, err := t.get(ctx, worldClusterGVK, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cluster := ownerName(u, "Cluster")
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: cluster}
	if !u.GetDeletionTimestamp().IsZero() {
		if cluster != "" {
			if err := t.workloads.DeleteCluster(key); err != nil {
				return reconcile.Result{}, err
			}
		}
		controllerutil.RemoveFinalizer(u, worldFinalizer)
		return reconcile.Result{}, t.client.Update(ctx, u)
	}
	if cluster == "" {
		return reconcile.Result{}, nil
	}
	if controllerutil.AddFinalizer(u, worldFinalizer) {
		if err := t.client.Update(ctx, u); err != nil {
			return reconcile.Result{}, err
		}
	}
	host, port, err := t.workloads.EnsureCluster(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if h, _, _ := unstructured.NestedString(u.Object, "spec", "controlPlaneEndpoint", "host"); h == "" {
		before := u.DeepCopy()
		_ = unstructured.SetNestedField(u.Object, host, "spec", "controlPlaneEndpoint", "host")
		_ = unstructured.SetNestedField(u.Object, int64(port), "spec", "controlPlaneEndpoint", "port")
		if err := t.client.Patch(ctx, u, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, t.markProvisioned(ctx, u)
}

func (t *testInfra) markProvisioned(ctx context.Context, u *unstructured.Unstructured) error {
	if done, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned"); done {
		return nil
	}
	before := u.DeepCopy()
	_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned")
	return t.client.Status().Patch(ctx, u, client.MergeFrom(before))
}

func (t *testInfra) reconcileMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	u, err := t.get(ctx, worldMachineGVK, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	machine := &clusterv1.Machine{}
	name := ownerName(u, "Machine")
	if name == "" {
		return reconcile.Result{}, nil
	}
	if err := t.client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: name}, machine); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cluster := types.NamespacedName{Namespace: u.GetNamespace(), Name: machine.Spec.ClusterName}
	if !u.GetDeletionTimestamp().IsZero() {
		if err := t.workloads.Leave(ctx, cluster, u.GetName()); err != nil {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(u, worldFinalizer)
		return reconcile.Result{}, t.client.Update(ctx, u)
	}
	if controllerutil.AddFinalizer(u, worldFinalizer) {
		if err := t.client.Update(ctx, u); err != nil {
			return reconcile.Result{}, err
		}
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return reconcile.Result{}, nil // the Machine watch brings us back
	}
	providerID := fmt.Sprintf("world://%s/%s", u.GetNamespace(), u.GetName())
	_, isCP := machine.Labels[clusterv1.MachineControlPlaneLabel]
	if err := t.workloads.Join(ctx, Member{Cluster: cluster, NodeName: u.GetName(), ProviderID: providerID,
		Version: machine.Spec.Version, ControlPlane: isCP}); err != nil {
		return reconcile.Result{}, err
	}
	if id, _, _ := unstructured.NestedString(u.Object, "spec", "providerID"); id == "" {
		before := u.DeepCopy()
		_ = unstructured.SetNestedField(u.Object, providerID, "spec", "providerID")
		if err := t.client.Patch(ctx, u, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, t.markProvisioned(ctx, u)
}

// machineOwnerMap sends Machine events to their WorldMachine, so that a
// machine gets its bootstrap data without polling.
func machineOwnerMap(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.Kind != worldMachineGVK.Kind {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

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

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	kcfg "sigs.k8s.io/cluster-api/util/kubeconfig"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/controlplaneservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden/goldenplan"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// oracle is the KubeVirt floor's infrastructure provider: it does only
// what any KubeVirt provider must, each at the earliest moment
// (docs/benchmark.md#the-kubevirt-floor). A KubevirtCluster gets the
// provider's control-plane Service and is provisioned once the Service has
// an address. A KubevirtMachine's golden image is imported once per
// namespace, as the provider does, from the machine's first look; once the
// Machine has bootstrap data and the golden volume is ready, the
// machine's VM (the provider's own builder) and user data Secret are
// created; it is provisioned as soon as the VM instance is Ready with an
// address, and its tenant Node gets the providerID Cluster API matches it
// by. No status is written before that, no Event, no check: the floor is
// what KubeVirt, CDI and Cluster API take.
type oracle struct {
	c client.Client
	// tenants are clients of the tenant clusters, by Cluster.
	mu      sync.Mutex
	tenants map[types.NamespacedName]client.Client
}

// nodeRecheck is how soon to look for a provisioned machine's Node again:
// the tenant clusters are not watched.
const nodeRecheck = 200 * time.Millisecond

// startOracle runs the oracle's controllers in this process until ctx
// ends; stopped is closed once they have.
func startOracle(ctx context.Context, w *world.World) (stopped <-chan struct{}, _ error) {
	mgr, err := ctrl.NewManager(w.Env.Config, ctrl.Options{Scheme: w.Env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return nil, err
	}
	o := &oracle{c: mgr.GetClient(), tenants: map[types.NamespacedName]client.Client{}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("oracle-cluster").For(&infrav1.KubevirtCluster{}).Owns(&corev1.Service{}).
		Complete(reconcile.Func(o.reconcileCluster)); err != nil {
		return nil, err
	}
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("oracle-machine").For(&infrav1.KubevirtMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("KubevirtMachine")))).
		Watches(&kubevirtv1.VirtualMachineInstance{}, sameName).
		Watches(&cdiv1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(o.goldenUsers)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(reconcile.Func(o.reconcileMachine)); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	return done, nil
}

func (o *oracle) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kc := &infrav1.KubevirtCluster{}
	if err := o.c.Get(ctx, req.NamespacedName, kc); err != nil || ptr.Deref(kc.Status.Initialization.Provisioned, false) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := util.GetOwnerCluster(ctx, o.c, kc.ObjectMeta)
	if err != nil || cluster == nil {
		return reconcile.Result{}, err
	}
	svc, err := controlplaneservice.Ensure(ctx, o.c, kc, cluster.Name, kc.Namespace, metav1.NewControllerRef(kc, infrav1.GroupVersion.WithKind("KubevirtCluster")), false)
	if err != nil {
		return reconcile.Result{}, err
	}
	ep, ok, _ := controlplaneservice.Endpoint(kc, svc, nil)
	if !ok {
		// The Service's update brings the cluster back.
		return reconcile.Result{}, nil
	}
	before := kc.DeepCopy()
	kc.Spec.ControlPlaneEndpoint = ep
	if err := o.c.Patch(ctx, kc, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, err
	}
	before = kc.DeepCopy()
	kc.Status.Ready, kc.Status.Initialization.Provisioned = true, ptr.To(true)
	return reconcile.Result{}, o.c.Status().Patch(ctx, kc, client.MergeFrom(before))
}

// goldenUsers are the KubevirtMachines of a golden volume's namespace,
// which wait for its import.
func (o *oracle) goldenUsers(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetLabels()[goldenplan.Label] != "true" {
		return nil
	}
	kms := &infrav1.KubevirtMachineList{}
	if err := o.c.List(ctx, kms, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range kms.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kms.Items[i])})
	}
	return out
}

func (o *oracle) reconcileMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	km := &infrav1.KubevirtMachine{}
	if err := o.c.Get(ctx, req.NamespacedName, km); err != nil || !km.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	m, err := util.GetOwnerMachine(ctx, o.c, km.ObjectMeta)
	if err != nil || m == nil {
		return reconcile.Result{}, err
	}
	if ptr.Deref(km.Status.Initialization.Provisioned, false) {
		return o.nodeProviderID(ctx, km, m)
	}
	vm := &kubevirtv1.VirtualMachine{}
	err = o.c.Get(ctx, req.NamespacedName, vm)
	if apierrors.IsNotFound(err) {
		// The import starts before the bootstrap data is there, as the
		// provider's does.
		volume, err := o.goldenVolume(ctx, km)
		if err != nil || volume == nil || m.Spec.Bootstrap.DataSecretName == nil {
			return reconcile.Result{}, err
		}
		data, err := o.bootstrapData(ctx, km, m)
		if err != nil || data == nil {
			return reconcile.Result{RequeueAfter: nodeRecheck}, err
		}
		if vm, err = o.createVM(ctx, km, m, volume, data); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, o.createUserData(ctx, km, vm, data)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := o.c.Get(ctx, req.NamespacedName, vmi); apierrors.IsNotFound(err) {
		// A Secret whose create failed after its VM's is created again;
		// the instance's creation brings the machine back.
		data, err := o.bootstrapData(ctx, km, m)
		if err != nil || data == nil {
			return reconcile.Result{RequeueAfter: nodeRecheck}, err
		}
		return reconcile.Result{}, o.createUserData(ctx, km, vm, data)
	} else if err != nil || !vmiReady(vmi) {
		// So do the instance's updates.
		return reconcile.Result{}, err
	}
	before := km.DeepCopy()
	km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + km.Name)
	if err := o.c.Patch(ctx, km, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, err
	}
	before = km.DeepCopy()
	km.Status.Ready, km.Status.Initialization.Provisioned = true, ptr.To(true)
	for _, iface := range vmi.Status.Interfaces {
		if iface.IP != "" {
			km.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: iface.IP}}
			break
		}
	}
	if err := o.c.Status().Patch(ctx, km, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, err
	}
	return o.nodeProviderID(ctx, km, m)
}

// goldenVolume creates the machine's golden volume when it is not there,
// and returns it once its import succeeded.
func (o *oracle) goldenVolume(ctx context.Context, km *infrav1.KubevirtMachine) (*types.NamespacedName, error) {
	if !goldenplan.Needed(km.Spec.RootDisk) {
		return &types.NamespacedName{}, nil
	}
	want := goldenplan.DataVolume(km.Spec.RootDisk, km.Namespace)
	dv := &cdiv1.DataVolume{}
	err := o.c.Get(ctx, client.ObjectKeyFromObject(want), dv)
	if apierrors.IsNotFound(err) {
		// A create another machine won is fine: the watch follows it.
		return nil, client.IgnoreAlreadyExists(o.c.Create(ctx, want))
	}
	if err != nil || dv.Status.Phase != cdiv1.Succeeded {
		return nil, err
	}
	key := client.ObjectKeyFromObject(dv)
	return &key, nil
}

// bootstrapData reads the Machine's bootstrap data; nil while the cache
// has not seen its Secret, which is not watched: the caller looks again
// shortly.
func (o *oracle) bootstrapData(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine) (*bootstrapdata.Data, error) {
	data, _, err := bootstrapdata.Read(ctx, o.c, km.Namespace, m.Spec.Bootstrap.DataSecretName, km.Spec.UserData.NetworkDataSecretRef, "Machine")
	return data, err
}

// createVM creates the VM the provider would build for the machine.
func (o *oracle) createVM(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine, volume *types.NamespacedName,
	data *bootstrapdata.Data) (*kubevirtv1.VirtualMachine, error) {
	in := vmbuilder.Input{
		Name: km.Name, Namespace: km.Namespace, Spec: km.Spec, KubevirtMachineNamespace: km.Namespace,
		ClusterName: m.Spec.ClusterName, MachineName: m.Name, MachineDeployment: m.Labels[clusterv1.MachineDeploymentNameLabel],
		ControlPlane: util.IsControlPlaneMachine(m), FailureDomain: m.Spec.FailureDomain,
		UserDataSecret: userDataSecretName(km), Format: data.Format, HasNetworkData: data.NetworkData != nil,
		Owner: metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine")),
	}
	if volume.Name != "" {
		in.GoldenVolume = volume
	}
	vm, err := vmbuilder.Build(in)
	if err != nil {
		return nil, err
	}
	if err := o.c.Create(ctx, vm); apierrors.IsAlreadyExists(err) {
		// Created by an earlier try whose Secret failed.
		return vm, o.c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
	} else if err != nil {
		return nil, err
	}
	return vm, nil
}

// createUserData creates the machine's user data Secret, owned by its VM
// as the provider's is.
func (o *oracle) createUserData(ctx context.Context, km *infrav1.KubevirtMachine, vm *kubevirtv1.VirtualMachine, data *bootstrapdata.Data) error {
	userData, err := userdata.Render(data.Format, data.Raw, userdata.Additions{})
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: userDataSecretName(km), Namespace: km.Namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: kubevirtv1.VirtualMachineGroupVersionKind.GroupVersion().String(), Kind: kubevirtv1.VirtualMachineGroupVersionKind.Kind,
			Name: vm.Name, UID: vm.UID}}},
		Type: corev1.SecretTypeOpaque, Data: bootstrapdata.SecretData(userData, data.NetworkData),
	}
	return client.IgnoreAlreadyExists(o.c.Create(ctx, secret))
}

func userDataSecretName(km *infrav1.KubevirtMachine) string {
	return km.Name + infrav1.UserDataSecretSuffix
}

// nodeProviderID gives the machine's tenant Node its providerID, as any
// provider must for Cluster API to find the Node; until the Node is there,
// it looks again shortly.
func (o *oracle) nodeProviderID(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine) (reconcile.Result, error) {
	if m.Status.NodeRef.IsDefined() {
		return reconcile.Result{}, nil
	}
	tenant, err := o.tenant(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName})
	if err != nil {
		return reconcile.Result{RequeueAfter: nodeRecheck}, nil
	}
	node := &corev1.Node{}
	if err := tenant.Get(ctx, types.NamespacedName{Name: machine.NodeName(km)}, node); err != nil {
		return reconcile.Result{RequeueAfter: nodeRecheck}, nil
	}
	if node.Spec.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	before := node.DeepCopy()
	node.Spec.ProviderID = *km.Spec.ProviderID
	if err := tenant.Patch(ctx, node, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, fmt.Errorf("setting the providerID of tenant Node %s: %w", node.Name, err)
	}
	return reconcile.Result{}, nil
}

// tenant is a client of a tenant cluster, from its kubeconfig Secret.
func (o *oracle) tenant(ctx context.Context, cluster types.NamespacedName) (client.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.tenants[cluster]; ok {
		return c, nil
	}
	kubeconfig, err := kcfg.FromSecret(ctx, o.c, cluster)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	o.tenants[cluster] = c
	return c, nil
}

// runKubeVirtFloor measures the KubeVirt floor in a world of its own, with
// the oracle as the infrastructure provider, and stops that world again.
func runKubeVirtFloor(ctx context.Context, o options) (provisioned, nodeRefs time.Duration, _ Timeline, cpu map[string]float64, err error) {
	// The oracle acts on this provider's kinds, whatever provider is
	// measured.
	withCRDs := o
	withCRDs.noProvider = false
	w, err := startWorld(withCRDs, "KubeVirt floor", nil)
	if err != nil {
		return 0, 0, Timeline{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	tl := newTimeline()
	stopped, err := startOracle(ctx, w)
	if err == nil {
		cpu, err = whileMeasuring(func() (err error) {
			provisioned, nodeRefs, err = phase{name: "KubeVirt floor", mutate: onStorageClass(o.storageClass), timeline: tl, kubevirtMachines: true}.measure(ctx, w, o)
			return err
		})
	}
	// The oracle stops before its world does.
	cancel()
	if stopped != nil {
		<-stopped
	}
	if stopErr := w.Stop(); err == nil && stopErr != nil {
		err = fmt.Errorf("stopping the KubeVirt floor's world: %w", stopErr)
	}
	if err == nil {
		fmt.Printf(">> KubeVirt floor: all provisioned at %.1fs, all with a Node at %.1fs\n", provisioned.Seconds(), nodeRefs.Seconds())
	}
	return provisioned, nodeRefs, tl.summary(), cpu, err
}

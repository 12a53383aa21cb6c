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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

// CommunityProvider acts for the community KubeVirt provider's controllers
// (v0.11.2) in one namespace of a management cluster that is its own infra
// cluster, to build a running cluster the way that provider leaves it. Its
// Go module is not served here, so it cannot run; this does, for each
// object, what its controllers do to bring a cluster up
// (docs/kubevirt-behaviour.md, "What the community provider leaves
// behind"), and nothing else: no updates, no deletion, no remediation.
//
//   - KubevirtCluster: its finalizer, the SSH key Secret <name>-ssh-keys
//     owned by it, the Service <Cluster>-lb (fixture.CommunityService), the
//     Service's ClusterIP and port 6443 as the control-plane endpoint, then
//     ready.
//   - KubevirtMachine, once its Machine has bootstrap data: its finalizer,
//     the user data Secret and the VM (fixture.CommunityMachineFrom, from
//     the machine's template); once the instance is ready, the providerID
//     kubevirt://<name>, the addresses and ready; once the tenant Node
//     exists, its providerID, then nodeupdated.
//   - Status as it writes it: ready, and Cluster API v1beta1 conditions
//     (Ready and its own types, True with no reason), which
//     clusterctl.AddCommunityRelease's CRDs take. It also writes
//     initialization.provisioned, which it does not: Cluster API v1.14
//     reads that under the v1beta2 contract label those CRDs need there.
//
// One difference: the community provider adds the cluster's SSH key to the
// user data; this passes the bootstrap data through unchanged.
type CommunityProvider struct {
	c      client.Client
	ns     string
	cancel context.CancelFunc
	done   chan struct{}

	// tenants are the tenant clusters' clients, by cluster name.
	tenants map[string]client.Client

	mu      sync.Mutex
	lastErr error
}

// StartCommunityProvider starts acting for the community provider in ns of
// the management cluster c. It looks at the namespace every 200 ms, as
// nothing else would tell it; Stop ends it.
func StartCommunityProvider(c client.Client, ns string) *CommunityProvider {
	ctx, cancel := context.WithCancel(context.Background())
	p := &CommunityProvider{c: c, ns: ns, cancel: cancel, done: make(chan struct{}), tenants: map[string]client.Client{}}
	go func() {
		defer close(p.done)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		for {
			err := p.reconcile(ctx)
			p.mu.Lock()
			p.lastErr = err
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return p
}

// Stop stops it, as clusterctl delete stops the community provider's
// Deployment, and waits until it has.
func (p *CommunityProvider) Stop() {
	p.cancel()
	<-p.done
}

// LastError is what its last pass failed with, for a test's failure
// message.
func (p *CommunityProvider) LastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastErr == nil {
		return "the community provider's stand-in: no error"
	}
	return "the community provider's stand-in: " + p.lastErr.Error()
}

func (p *CommunityProvider) reconcile(ctx context.Context) error {
	var errs []error
	clusters := &infrav1.KubevirtClusterList{}
	if err := p.c.List(ctx, clusters, client.InNamespace(p.ns)); err != nil {
		return err
	}
	for i := range clusters.Items {
		errs = append(errs, p.reconcileCluster(ctx, &clusters.Items[i]))
	}
	machines := &infrav1.KubevirtMachineList{}
	if err := p.c.List(ctx, machines, client.InNamespace(p.ns)); err != nil {
		return err
	}
	for i := range machines.Items {
		errs = append(errs, p.reconcileMachine(ctx, &machines.Items[i]))
	}
	return errors.Join(errs...)
}

func (p *CommunityProvider) reconcileCluster(ctx context.Context, kc *infrav1.KubevirtCluster) error {
	cluster, err := util.GetOwnerCluster(ctx, p.c, kc.ObjectMeta)
	if err != nil || cluster == nil || kc.Status.Ready {
		return err
	}
	if controllerutil.AddFinalizer(kc, infrav1.ClusterFinalizer) {
		return p.c.Update(ctx, kc)
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: kc.Name + "-ssh-keys",
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}}}
	if err := p.c.Get(ctx, client.ObjectKeyFromObject(keys), keys); apierrors.IsNotFound(err) {
		pair, err := sshcheck.NewKeyPair()
		if err != nil {
			return err
		}
		keys.Data = map[string][]byte{"key": pair.Private, "pub": []byte(pair.Public)}
		keys.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(kc, infrav1.GroupVersion.WithKind("KubevirtCluster"))}
		if err := p.c.Create(ctx, keys); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	svc := fixture.CommunityService(kc.Namespace, cluster.Name)
	if err := p.c.Get(ctx, client.ObjectKeyFromObject(svc), svc); apierrors.IsNotFound(err) {
		return p.c.Create(ctx, svc)
	} else if err != nil {
		return err
	}
	if svc.Spec.ClusterIP == "" {
		return fmt.Errorf("service %s has no ClusterIP yet", svc.Name)
	}
	if kc.Spec.ControlPlaneEndpoint.Host == "" {
		kc.Spec.ControlPlaneEndpoint.Host, kc.Spec.ControlPlaneEndpoint.Port = svc.Spec.ClusterIP, 6443
		return p.c.Update(ctx, kc)
	}
	return p.patchStatus(ctx, kc, map[string]any{"ready": true, "initialization": map[string]any{"provisioned": true},
		"conditions": communityConditions("LoadBalancerAvailable")})
}

func (p *CommunityProvider) reconcileMachine(ctx context.Context, km *infrav1.KubevirtMachine) error {
	machine, err := util.GetOwnerMachine(ctx, p.c, km.ObjectMeta)
	if err != nil || machine == nil || machine.Spec.Bootstrap.DataSecretName == nil || km.Status.NodeUpdated {
		return err
	}
	if controllerutil.AddFinalizer(km, infrav1.MachineFinalizer) {
		return p.c.Update(ctx, km)
	}
	vm := &kubevirtv1.VirtualMachine{}
	key := types.NamespacedName{Namespace: km.Namespace, Name: km.Name}
	if err := p.c.Get(ctx, key, vm); apierrors.IsNotFound(err) {
		return p.createVM(ctx, km, machine)
	} else if err != nil {
		return err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := p.c.Get(ctx, key, vmi); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !vmiReady(vmi) {
		return nil
	}
	if !km.Status.Ready {
		if km.Spec.ProviderID == nil {
			km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + km.Name)
			return p.c.Update(ctx, km)
		}
		var addresses []clusterv1.MachineAddress
		for _, iface := range vmi.Status.Interfaces {
			for _, ip := range iface.IPs {
				addresses = append(addresses,
					clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip},
					clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: ip})
			}
		}
		return p.patchStatus(ctx, km, map[string]any{"ready": true, "initialization": map[string]any{"provisioned": true}, "addresses": addresses,
			"conditions": communityConditions("VMProvisioned", "BootstrapExecSucceeded")})
	}
	tenant := p.tenants[machine.Spec.ClusterName]
	if tenant == nil {
		if tenant, _, err = TenantClient(ctx, p.c, km.Namespace, machine.Spec.ClusterName); err != nil {
			return err
		}
		p.tenants[machine.Spec.ClusterName] = tenant
	}
	node := &corev1.Node{}
	if err := tenant.Get(ctx, client.ObjectKey{Name: vmi.Spec.Hostname}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = *km.Spec.ProviderID
		return tenant.Update(ctx, node)
	}
	return p.patchStatus(ctx, km, map[string]any{"nodeupdated": true})
}

// patchStatus merges status into obj's, as the community provider's
// patch helper writes it.
func (p *CommunityProvider) patchStatus(ctx context.Context, obj client.Object, status map[string]any) error {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return p.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}

// communityConditions are True conditions of types and Ready as the
// community provider writes them: Cluster API v1beta1 conditions, with no
// reason or message when True.
func communityConditions(types ...string) []map[string]any {
	now := time.Now().UTC().Format(time.RFC3339)
	out := []map[string]any{{"type": "Ready", "status": "True", "lastTransitionTime": now}}
	for _, t := range types {
		out = append(out, map[string]any{"type": t, "status": "True", "lastTransitionTime": now})
	}
	return out
}

func (p *CommunityProvider) createVM(ctx context.Context, km *infrav1.KubevirtMachine, machine *clusterv1.Machine) error {
	bootstrap := &corev1.Secret{}
	if err := p.c.Get(ctx, types.NamespacedName{Namespace: km.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, bootstrap); err != nil {
		return err
	}
	_, controlPlane := machine.Labels[clusterv1.MachineControlPlaneLabel]
	vm, userData := fixture.CommunityMachineFrom(km.Spec.VirtualMachineTemplate.Spec, km.Namespace, km.Name, machine.Spec.ClusterName,
		bootstrap.Name, controlPlane, bootstrap.Data["value"])
	userData.Labels = bootstrap.Labels
	if err := p.c.Create(ctx, userData); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return p.c.Create(ctx, vm)
}

func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

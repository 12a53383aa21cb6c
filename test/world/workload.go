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
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Workloads are the tenant (workload) clusters of the world: Cluster API's
// in-memory API servers and etcd, one listener per cluster on a port of its
// own (Cluster API's mux binds it on every address).
// Joining a machine creates what kubeadm and the kubelet would: the Node
// with its provider ID and, on control-plane machines, the static pods, an
// etcd member and an API server backend.
type Workloads struct {
	mgmt client.Reader
	mgr  inmemoryruntime.Manager
	// mux serves every cluster, each on a port of its own.
	mux *inmemoryserver.WorkloadClustersMux
	mu  sync.Mutex
	// addrs are the clusters' API endpoints: the mux listener, or the first
	// Service address a proxy serves (EnsureClusterAt).
	addrs map[string]string
	// muxAddrs are the clusters' mux listeners, the proxies' backends.
	muxAddrs map[string]string
	// proxies serve clusters on their Service addresses (a load balancer's,
	// a ClusterIP), by cluster and address.
	proxies map[string]map[string]*lbProxy
	// cniWritten are the Nodes, by cluster, where a CNI wrote its
	// configuration: it stays there across the guest's reboots, and goes
	// with the machine.
	cniWritten map[string]map[string]bool
	// waiting are the Nodes, by cluster, whose kubelets wait for a CNI.
	waiting map[string]map[string]bool
	// cloud plays the tenants' cloud controller managers; nil until the
	// world sets it.
	cloud *cloudController
}

func newWorkloads(ctx context.Context, mgmt client.Reader) (*Workloads, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	addStorageClasses()
	mgr := inmemoryruntime.NewManager(s)
	if err := mgr.Start(ctx); err != nil {
		return nil, err
	}
	mux, err := inmemoryserver.NewWorkloadClustersMux(mgr, "127.0.0.1", inmemoryserver.CustomPorts{DebugPort: 0})
	if err != nil {
		return nil, err
	}
	w := &Workloads{mgmt: mgmt, mgr: mgr, mux: mux, addrs: map[string]string{}, muxAddrs: map[string]string{},
		proxies: map[string]map[string]*lbProxy{}, cniWritten: map[string]map[string]bool{},
		waiting: map[string]map[string]bool{}}
	go w.runKubelets(ctx)
	go w.runCloud(ctx)
	return w, nil
}

func groupName(cluster types.NamespacedName) string { return cluster.Namespace + "/" + cluster.Name }

// EnsureCluster creates the workload cluster's API endpoint on 127.0.0.1
// and returns where it listens.
func (w *Workloads) EnsureCluster(ctx context.Context, cluster types.NamespacedName) (string, int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ensureOn(ctx, cluster)
}

// EnsureClusterAt serves the workload cluster's API endpoint on host:port
// (a load balancer's or a ClusterIP's loopback address) with a certificate
// for that address, creating the cluster first if needed, and returns the
// cluster's endpoint.
func (w *Workloads) EnsureClusterAt(ctx context.Context, cluster types.NamespacedName, host string, port int32) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := groupName(cluster)
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	if w.proxies[name][addr] != nil {
		return w.addrs[name], nil
	}
	_, exists := w.addrs[name]
	if !exists {
		if _, _, err := w.ensureOn(ctx, cluster); err != nil {
			return "", err
		}
	}
	proxy, err := w.startLBProxy(cluster, host, port, w.muxAddrs[name])
	if err != nil && !exists {
		return "", errors.Join(err, w.dropLocked(name))
	}
	if err != nil {
		return "", err
	}
	if w.proxies[name] == nil {
		w.proxies[name] = map[string]*lbProxy{}
	}
	w.proxies[name][addr] = proxy
	if !exists || len(w.proxies[name]) == 1 {
		// A proxied address is the endpoint clients are given.
		w.addrs[name] = addr
	}
	return w.addrs[name], nil
}

// ensureOn registers the cluster on the mux, listening on a free port.
func (w *Workloads) ensureOn(ctx context.Context, cluster types.NamespacedName) (string, int32, error) {
	name := groupName(cluster)
	w.mgr.AddResourceGroup(name)
	c := w.mgr.GetResourceGroup(name).GetClient()
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespacePublic, metav1.NamespaceSystem} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", 0, err
		}
	}
	// The mux binds the port only once the cluster's first API server
	// joins; a port the kernel picked could go to another listener first.
	p, err := testenv.FreePort()
	if err != nil {
		return "", 0, err
	}
	port := int32(p)
	l, err := w.mux.InitWorkloadClusterListener(name, port)
	if err != nil {
		return "", 0, err
	}
	if err := w.mux.RegisterResourceGroup(name, name); err != nil {
		return "", 0, err
	}
	w.addrs[name] = net.JoinHostPort(l.Host(), fmt.Sprint(l.Port()))
	w.muxAddrs[name] = w.addrs[name]
	return l.Host(), l.Port(), nil
}

// Has reports whether the workload cluster exists.
func (w *Workloads) Has(cluster types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.addrs[groupName(cluster)]
	return ok
}

// Node returns a Node of a workload cluster.
func (w *Workloads) Node(ctx context.Context, cluster types.NamespacedName, name string) (*corev1.Node, error) {
	w.mu.Lock()
	rg := w.mgr.GetResourceGroup(groupName(cluster))
	w.mu.Unlock()
	if rg == nil {
		return nil, fmt.Errorf("no workload cluster %s", cluster)
	}
	node := &corev1.Node{}
	if err := rg.GetClient().Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return nil, err
	}
	return node, nil
}

// Member is one machine joining a workload cluster.
type Member struct {
	Cluster      types.NamespacedName
	NodeName     string
	ProviderID   string
	Version      string
	ControlPlane bool
	// Address is the InternalIP the kubelet reports: its --node-ip, else
	// the guest's address on its default route (sim.NodeIP); none for a
	// member that did not boot from bootstrap data.
	Address string
	// ExternalCloudProvider says the kubelet runs with
	// --cloud-provider=external: it leaves the Node to a cloud controller
	// manager.
	ExternalCloudProvider bool
	// NodeIPFlag is the kubelet's --node-ip, if it was given one.
	NodeIPFlag string
}

// Join makes a machine a Node of its cluster, with the control-plane pieces
// kubeadm would start on a control-plane machine.
func (w *Workloads) Join(ctx context.Context, m Member) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := groupName(m.Cluster)
	c := w.mgr.GetResourceGroup(name).GetClient()
	ready := w.kubeletReady(m.Cluster, m.NodeName)
	node := &corev1.Node{
		// The labels every kubelet sets on its Node.
		ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: map[string]string{corev1.LabelHostname: m.NodeName,
			corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}},
		Spec: corev1.NodeSpec{ProviderID: m.ProviderID},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: m.Version},
			Conditions: []corev1.NodeCondition{
				readyConditionWith(ready),
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastTransitionTime: metav1.Now()},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastTransitionTime: metav1.Now()},
			},
		},
	}
	if m.Address != "" {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: m.Address}, {Type: corev1.NodeHostName, Address: m.NodeName}}
	}
	if m.ControlPlane {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
		node.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	}
	if m.ExternalCloudProvider {
		// kubelet_node_status.go, initialNode: the cloud controller
		// manager removes it once it has initialized the Node.
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if m.NodeIPFlag != "" {
			node.Annotations = map[string]string{ProvidedNodeIPAnnotation: m.NodeIPFlag}
		}
	}
	node.Spec.Taints = readyTaints(node.Spec.Taints, ready)
	if ready != corev1.ConditionTrue {
		if w.waiting[name] == nil {
			w.waiting[name] = map[string]bool{}
		}
		w.waiting[name][m.NodeName] = true
	}
	if err := c.Create(ctx, node); apierrors.IsAlreadyExists(err) {
		// The machine booted again: its kubelet posts its status again.
		if err := setNodeReady(ctx, c, m.NodeName, ready); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("creating node %s: %w", m.NodeName, err)
	}
	if !m.ControlPlane {
		return nil
	}
	if err := w.startEtcd(ctx, c, name, m); err != nil {
		return err
	}
	for _, component := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := c.Create(ctx, staticPod(component, m.NodeName, nil)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	ca, key, err := w.caOf(ctx, m.Cluster, secret.ClusterCA)
	if err != nil {
		return err
	}
	mux := w.mux
	if !mux.HasAPIServer(name, "kube-apiserver-"+m.NodeName) {
		if err := mux.AddAPIServer(name, "kube-apiserver-"+m.NodeName, ca, key); err != nil {
			return err
		}
	}
	return createKubeadmObjects(ctx, c, m.Version)
}

func (w *Workloads) startEtcd(ctx context.Context, c inmemoryruntime.Client, name string, m Member) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"component": "etcd"}); err != nil {
		return err
	}
	// Identifiers of simulated etcd members need no cryptographic strength.
	clusterID := fmt.Sprint(rand.Uint32N(1<<31) + 1)                                                          //nolint:gosec // see above
	annotations := map[string]string{cloudv1.EtcdMemberIDAnnotationName: fmt.Sprint(rand.Uint32N(1<<31) + 1)} //nolint:gosec // see above
	if len(pods.Items) == 0 {
		annotations[cloudv1.EtcdLeaderFromAnnotationName] = time.Now().Format(time.RFC3339)
	} else {
		clusterID = pods.Items[0].Annotations[cloudv1.EtcdClusterIDAnnotationName]
	}
	annotations[cloudv1.EtcdClusterIDAnnotationName] = clusterID
	pod := staticPod("etcd", m.NodeName, annotations)
	if err := c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	mux := w.mux
	if mux.HasEtcdMember(name, pod.Name) {
		return nil
	}
	ca, key, err := w.caOf(ctx, m.Cluster, secret.EtcdCA)
	if err != nil {
		return err
	}
	return mux.AddEtcdMember(name, pod.Name, ca, key)
}

// NodeLost plays a tenant Node whose machine stopped without leaving (its
// guest crashed, or its infra node died): the kubelet stops posting status
// and the Node's Ready condition turns Unknown, as the tenant's node
// lifecycle controller would set it.
func (w *Workloads) NodeLost(ctx context.Context, cluster types.NamespacedName, nodeName string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	rg := w.mgr.GetResourceGroup(groupName(cluster))
	if rg == nil {
		return nil
	}
	err := setNodeReady(ctx, rg.GetClient(), nodeName, corev1.ConditionUnknown)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func setNodeReady(ctx context.Context, c inmemoryruntime.Client, name string, status corev1.ConditionStatus) error {
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return err
	}
	if cond := readyCondition(node); cond != nil && cond.Status != status {
		*cond = readyConditionWith(status)
		node.Spec.Taints = readyTaints(node.Spec.Taints, status)
		return c.Update(ctx, node)
	}
	return nil
}

// Leave removes a machine from its cluster: Node, static pods, etcd member
// and API server backend.
func (w *Workloads) Leave(ctx context.Context, cluster types.NamespacedName, nodeName string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := groupName(cluster)
	rg := w.mgr.GetResourceGroup(name)
	if rg == nil {
		return nil
	}
	c := rg.GetClient()
	for _, component := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: component + "-" + nodeName}}
		if err := c.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	mux := w.mux
	if mux.HasAPIServer(name, "kube-apiserver-"+nodeName) {
		if err := mux.DeleteAPIServer(name, "kube-apiserver-"+nodeName); err != nil {
			return err
		}
	}
	if mux.HasEtcdMember(name, "etcd-"+nodeName) {
		if err := mux.DeleteEtcdMember(name, "etcd-"+nodeName); err != nil {
			return err
		}
	}
	delete(w.cniWritten[name], nodeName)
	delete(w.waiting[name], nodeName)
	err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// DeleteCluster stops the cluster's listener and proxy and drops its
// objects.
func (w *Workloads) DeleteCluster(cluster types.NamespacedName) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropLocked(groupName(cluster))
}

func (w *Workloads) dropLocked(name string) error {
	var errs []error
	for _, p := range w.proxies[name] {
		errs = append(errs, p.close())
	}
	errs = append(errs, w.mux.DeleteWorkloadClusterListener(name))
	w.mgr.DeleteResourceGroup(name)
	delete(w.proxies, name)
	delete(w.waiting, name)
	delete(w.cniWritten, name)
	delete(w.addrs, name)
	delete(w.muxAddrs, name)
	return errors.Join(errs...)
}

// shutdown closes every cluster's proxy, listener and open connections,
// then the mux.
func (w *Workloads) shutdown(ctx context.Context) error {
	w.mu.Lock()
	var errs []error
	for name := range w.addrs {
		errs = append(errs, w.dropLocked(name))
	}
	w.mu.Unlock()
	err := w.mux.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Cluster API's in-memory mux waits for every connection to go
		// idle, and now and then one that outlived its proxy keeps it
		// waiting (the cause is not found yet). Its listeners are closed by
		// then and the world is done with the tenants, so this is not an
		// error of the world's shutdown.
		err = nil
	}
	return errors.Join(append(errs, err)...)
}

func (w *Workloads) caOf(ctx context.Context, cluster types.NamespacedName, purpose secret.Purpose) (*x509.Certificate, *rsa.PrivateKey, error) {
	s, err := secret.Get(ctx, w.mgmt, cluster, purpose)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s of %s: %w", purpose, cluster, err)
	}
	cert, err := certs.DecodeCertPEM(s.Data[secret.TLSCrtDataName])
	if err != nil {
		return nil, nil, err
	}
	key, err := certs.DecodePrivateKeyPEM(s.Data[secret.TLSKeyDataName])
	if err != nil {
		return nil, nil, err
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("%s of %s is not an RSA key", purpose, cluster)
	}
	return cert, rsaKey, nil
}

func staticPod(component, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: component + "-" + node, Annotations: annotations,
			Labels: map[string]string{"component": component, "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// createKubeadmObjects creates what "kubeadm init" leaves for Cluster API:
// the node-listing role for joining nodes, kubeadm-config, kube-proxy and
// CoreDNS.
func createKubeadmObjects(ctx context.Context, c inmemoryruntime.Client, version string) error {
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeadm:get-nodes"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:bootstrappers:kubeadm:default-node-token"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: metav1.NamespaceSystem},
			Data: map[string]string{"ClusterConfiguration": ""}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"component": "kube-proxy"}},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:" + ociTag(version)}}}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: metav1.NamespaceSystem}, Data: map[string]string{"Corefile": ".:53 {}"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: metav1.NamespaceSystem},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.0"}}}}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func ociTag(version string) string {
	out := []byte(version)
	for i, b := range out {
		if b == '+' {
			out[i] = '_'
		}
	}
	return string(out)
}

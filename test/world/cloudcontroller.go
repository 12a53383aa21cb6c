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
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// TaintUninitialized is the taint a kubelet run with
// --cloud-provider=external registers its Node with, until a cloud
// controller manager initializes it (k8s.io/cloud-provider
// api/well_known_taints.go, TaintExternalCloudProvider; the kubelet's
// initialNode).
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// ProvidedNodeIPAnnotation is where a kubelet run with
// --cloud-provider=external and --node-ip records that address for the
// cloud controller manager (k8s.io/cloud-provider
// api/well_known_annotations.go, AnnotationAlphaProvidedIPAddr).
const ProvidedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"

// Labels the cloud node controller sets (k8s.io/cloud-provider
// controllers/node/node_controller.go, getNodeModifiersFromCloudProvider).
const (
	instanceTypeLabel     = "node.kubernetes.io/instance-type"
	betaInstanceTypeLabel = "beta.kubernetes.io/instance-type"
	// instancetypeAnnotation is where kubevirt-cloud-controller-manager
	// reads a VM instance's type.
	instancetypeAnnotation = "kubevirt.io/instancetype-name"
)

// errDropped is what a connection the network dropped fails with.
var errDropped = os.ErrDeadlineExceeded

// cloudCallTimeout bounds one call the simulated CCM makes to the infra
// API server.
const cloudCallTimeout = 10 * time.Second

// cloudController plays kubevirt-cloud-controller-manager v0.6.0 in every
// tenant cluster that runs one, with Kubernetes' cloud node and service
// controllers: it initializes the Nodes its kubelets left to it and gives
// LoadBalancer Services an infra Service and its address. It works on the infra
// cluster only with the credential mounted into its Deployment, so the
// real API server's authorizer judges every call, and it reaches the infra
// API server only where the NetworkPolicies let a control-plane VM through.
type cloudController struct {
	// network judges the connection to the infra API server.
	network *sim.Simulator
	// infra finds the VM the CCM runs in, for the network only.
	infra  client.Reader
	scheme *runtime.Scheme

	mu sync.Mutex
	// clients are the credential clients by cluster, with the kubeconfig
	// each was built from: a rotated token makes a new one.
	clients map[string]credentialClient
	// failures are the last error by cluster and object: a Node's name,
	// a Service's namespace/name; for the CSI controller, the kind and
	// name ("PersistentVolumeClaim default/data").
	failures map[string]map[string]string
	// inflight are the CSI controller's calls under way, by cluster and
	// VolumeAttachment.
	inflight map[string]bool
}

// credentialClient acts on the infra cluster with one kubeconfig.
type credentialClient struct {
	kubeconfig string
	client     client.Client
	// virt reaches virt-api's subresources (addvolume, removevolume).
	virt *rest.RESTClient
	// server is the kubeconfig's API server, and namespace its current
	// context's namespace.
	server    *url.URL
	namespace string
}

// cloudConfig is what the CCM reads from its --cloud-config
// (cloud-provider-kubevirt pkg/provider/cloud.go, CloudConfig).
type cloudConfig struct {
	Kubeconfig  string `json:"kubeconfig"`
	Namespace   string `json:"namespace"`
	InstancesV2 struct {
		Enabled              *bool `json:"enabled"`
		ZoneAndRegionEnabled *bool `json:"zoneAndRegionEnabled"`
	} `json:"instancesV2"`
}

// infraAccess is how a tenant's CCM reaches the infra cluster.
type infraAccess struct {
	credentialClient
	config cloudConfig
}

func newCloudController(network *sim.Simulator, infra client.Reader, scheme *runtime.Scheme) *cloudController {
	return &cloudController{network: network, infra: infra, scheme: scheme,
		clients: map[string]credentialClient{}, failures: map[string]map[string]string{}, inflight: map[string]bool{}}
}

// sync has the cluster's CCM, if it runs, initialize every Node that
// carries TaintUninitialized and keep the infra Services of the tenant's
// LoadBalancer Services. What fails is left as it was and tried again on
// the next call, as the controllers requeue it.
func (cc *cloudController) sync(ctx context.Context, c inmemoryruntime.Client, cluster string) error {
	ccm, found, err := findCCM(ctx, c)
	if err != nil || !found {
		return err
	}
	var nodes []corev1.Node
	if err := listAs(ctx, c, corev1.SchemeGroupVersion.WithKind("NodeList"), &nodes); err != nil {
		return err
	}
	var waiting []*corev1.Node
	for i := range nodes {
		if hasTaint(&nodes[i], TaintUninitialized) {
			waiting = append(waiting, &nodes[i])
		}
	}
	var services []corev1.Service
	if err := listAs(ctx, c, corev1.SchemeGroupVersion.WithKind("ServiceList"), &services); err != nil {
		return err
	}
	balancers := pendingLoadBalancers(services)
	if len(waiting) == 0 && len(balancers) == 0 {
		return nil
	}
	access, err := cc.access(ctx, c, cluster, ccm)
	if err == nil {
		err = cc.reach(ctx, nodes, access.credentialClient)
	}
	callCtx, cancel := context.WithTimeout(ctx, cloudCallTimeout)
	defer cancel()
	for _, node := range waiting {
		nodeErr := err
		if nodeErr == nil {
			nodeErr = cc.initializeNode(callCtx, c, access, node)
		}
		cc.fail(cluster, node.Name, nodeErr)
	}
	// The CCM's --cluster-name names the tenant on the infra Services.
	clusterName := cmp.Or(ccm.arg("--cluster-name"), "kubernetes")
	for _, svc := range balancers {
		svcErr := err
		if svcErr == nil {
			svcErr = cc.syncLoadBalancer(callCtx, c, access, clusterName, svc)
		}
		cc.fail(cluster, svc.Namespace+"/"+svc.Name, svcErr)
	}
	return nil
}

// initializeNode does what the node controller does with InstancesV2's
// InstanceMetadata (cloud-provider-kubevirt pkg/provider/instances_v2.go):
// the VM instance named like the Node gives the provider ID, the
// addresses of its "default" interface and its instance type; zone and
// region come from its infra Node when enabled. All changes and the
// taint's removal go in one update; on any error the Node is left as it
// was.
func (cc *cloudController) initializeNode(ctx context.Context, c inmemoryruntime.Client, access infraAccess, node *corev1.Node) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := access.client.Get(ctx, types.NamespacedName{Namespace: access.namespace, Name: node.Name}, vmi); err != nil {
		return fmt.Errorf("getting the instance of node %s: %w", node.Name, err)
	}
	if !enabled(access.config.InstancesV2.Enabled) {
		return errors.New("instancesV2 is disabled in the cloud config: the node controller gets no instance metadata")
	}
	if enabled(access.config.InstancesV2.ZoneAndRegionEnabled) {
		host := &corev1.Node{}
		if err := access.client.Get(ctx, types.NamespacedName{Name: vmi.Status.NodeName}, host); err != nil {
			return fmt.Errorf("getting the zone of node %s: %w", node.Name, err)
		}
		for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion} {
			if v := host.Labels[key]; v != "" {
				setLabel(node, key, v)
			}
		}
	}
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = "kubevirt://" + vmi.Name
	}
	if t := vmi.Annotations[instancetypeAnnotation]; t != "" {
		setLabel(node, instanceTypeLabel, t)
		setLabel(node, betaInstanceTypeLabel, t)
	}
	addrs := defaultInterfaceAddresses(vmi)
	if len(addrs) == 0 {
		// The CCM keeps the Node's own InternalIPs then.
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addrs = append(addrs, a)
			}
		}
	}
	if provided := node.Annotations[ProvidedNodeIPAnnotation]; provided != "" {
		// The kubelet was given --node-ip: the node controller takes the
		// cloud's addresses only if that one is among them
		// (node/helpers/address.go, GetNodeAddressesFromNodeIP).
		if !slices.ContainsFunc(addrs, func(a corev1.NodeAddress) bool { return a.Address == provided }) {
			return fmt.Errorf("failed to get node address from cloud provider that matches ip: %s", provided)
		}
		addrs = slices.DeleteFunc(addrs, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP && a.Address != provided })
	}
	// The kubelet's hostname address stays.
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeHostName {
			addrs = append(addrs, a)
		}
	}
	node.Status.Addresses = addrs
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != TaintUninitialized {
			taints = append(taints, t)
		}
	}
	node.Spec.Taints = taints
	if err := c.Update(ctx, node); err != nil {
		return err
	}
	// The node controller records it (syncNode's "Synced" event), as an
	// event recorder does: without failing on it.
	now := metav1.Now()
	_ = c.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("%s.%x", node.Name, now.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
		Reason:         "Synced", Message: "Node synced successfully", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: cloudNodeController}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})
	return nil
}

// cloudNodeController is the source of the node controller's events.
const cloudNodeController = "cloud-node-controller"

// defaultInterfaceAddresses are the InternalIPs of the instance's
// interface named "default", each once.
func defaultInterfaceAddresses(vmi *kubevirtv1.VirtualMachineInstance) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	seen := map[string]bool{}
	for _, iface := range vmi.Status.Interfaces {
		if iface.Name != "default" {
			continue
		}
		for _, ip := range iface.IPs {
			if ip != "" && !seen[ip] {
				seen[ip] = true
				out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
			}
		}
	}
	return out
}

// access reads the CCM's cloud config and infra kubeconfig from what its
// Deployment mounts, and returns a client acting with that credential.
func (cc *cloudController) access(ctx context.Context, c inmemoryruntime.Client, cluster string, ccm addonDeployment) (infraAccess, error) {
	raw, err := ccm.file(ctx, c, ccm.arg("--cloud-config"))
	if err != nil {
		return infraAccess{}, fmt.Errorf("reading the cloud config: %w", err)
	}
	access := infraAccess{}
	if err := yaml.Unmarshal(raw, &access.config); err != nil {
		return infraAccess{}, fmt.Errorf("parsing the cloud config: %w", err)
	}
	kubeconfig, err := ccm.file(ctx, c, access.config.Kubeconfig)
	if err != nil {
		return infraAccess{}, fmt.Errorf("reading the infra kubeconfig: %w", err)
	}
	if access.credentialClient, err = cc.credential(cluster+" ccm", kubeconfig); err != nil {
		return infraAccess{}, err
	}
	// The cloud config's namespace wins over the kubeconfig's.
	access.namespace = cmp.Or(access.config.Namespace, access.namespace)
	return access, nil
}

// credential returns the clients acting with a kubeconfig, built once per
// component (key) and kubeconfig: a rotated token makes new ones.
func (cc *cloudController) credential(key string, kubeconfig []byte) (credentialClient, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cached, ok := cc.clients[key]; ok && cached.kubeconfig == string(kubeconfig) {
		return cached, nil
	}
	loaded, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return credentialClient{}, fmt.Errorf("parsing the infra kubeconfig: %w", err)
	}
	cred := credentialClient{kubeconfig: string(kubeconfig)}
	if ctxConfig := loaded.Contexts[loaded.CurrentContext]; ctxConfig != nil {
		cred.namespace = ctxConfig.Namespace
	}
	restConfig, err := clientcmd.NewDefaultClientConfig(*loaded, nil).ClientConfig()
	if err != nil {
		return credentialClient{}, fmt.Errorf("the infra kubeconfig: %w", err)
	}
	if cred.server, err = url.Parse(restConfig.Host); err != nil {
		return credentialClient{}, fmt.Errorf("the infra kubeconfig's server: %w", err)
	}
	if cred.client, err = client.New(restConfig, client.Options{Scheme: cc.scheme}); err != nil {
		return credentialClient{}, err
	}
	if cred.virt, err = NewVirtSubresourceClient(restConfig); err != nil {
		return credentialClient{}, err
	}
	cc.clients[key] = cred
	return cred, nil
}

// reach checks that the CCM, on the host network of a control-plane VM,
// can connect to the infra API server under the NetworkPolicies in force.
func (cc *cloudController) reach(ctx context.Context, nodes []corev1.Node, access credentialClient) error {
	host, portText := access.server.Hostname(), access.server.Port()
	if portText == "" {
		portText = "443"
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		if _, cp := node.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			continue
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := cc.infra.Get(ctx, types.NamespacedName{Namespace: access.namespace, Name: node.Name}, vmi); err != nil {
			continue
		}
		from, err := cc.network.GuestEndpoint(ctx, vmi)
		if err != nil {
			return err
		}
		ok, err := cc.network.Reachable(ctx, from, sim.AddressEndpoint(host), "TCP", int32(port))
		if err != nil || ok {
			return err
		}
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP(host), Port: int(port)}, Err: errDropped}
	}
	return nil
}

// fail records the last error on an object; nil clears it.
func (cc *cloudController) fail(cluster, node string, err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if err == nil {
		delete(cc.failures[cluster], node)
		return
	}
	if cc.failures[cluster] == nil {
		cc.failures[cluster] = map[string]string{}
	}
	cc.failures[cluster][node] = err.Error()
}

// failure is the last error on an object, or "".
func (cc *cloudController) failure(cluster, node string) string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.failures[cluster][node]
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func setLabel(node *corev1.Node, key, value string) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[key] = value
}

// enabled reads an optional switch that defaults to on.
func enabled(b *bool) bool { return b == nil || *b }

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

package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/np-guard/netpol-analyzer/pkg/netpol/eval"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The simulated infra network has no packets. Every connection the world
// makes on someone's behalf asks Reachable instead, which evaluates the
// NetworkPolicies in force at that moment with the policy engine of
// github.com/np-guard/netpol-analyzer (pkg/netpol/eval), an implementation
// of https://kubernetes.io/docs/concepts/services-networking/network-policies/:
// a pod no policy selects for a direction accepts everything in it; a pod
// some policy selects accepts what any of them allows; a connection needs
// both the source's egress and the destination's ingress. Addresses no pod
// holds (other networks, such as Multus ones, and everything outside the
// cluster) are selected by no policy, as on a real CNI.

// Endpoint is one end of a connection in the infra cluster's network: a
// pod, or an address.
type Endpoint struct {
	// Pod names an infra pod.
	Pod types.NamespacedName
	// Labels, when set, make Pod a pod the API server does not hold: a
	// process the world runs as if it ran in that pod (a provider in the
	// test process).
	Labels map[string]string
	// IP is an address; one a pod holds stands for that pod.
	IP string
}

// PodEndpoint is the infra pod key.
func PodEndpoint(key types.NamespacedName) Endpoint { return Endpoint{Pod: key} }

// AddressEndpoint is the address ip: a pod's, or one outside the pod
// network.
func AddressEndpoint(ip string) Endpoint { return Endpoint{IP: ip} }

// ProcessEndpoint is a process that connects as a pod with these labels in
// namespace would.
func ProcessEndpoint(namespace, name string, labels map[string]string) Endpoint {
	return Endpoint{Pod: types.NamespacedName{Namespace: namespace, Name: name}, Labels: labels}
}

func (e Endpoint) String() string {
	if e.IP != "" {
		return e.IP
	}
	return e.Pod.String()
}

// ProviderEndpoint is where the provider's connections come from unless
// the world says otherwise: a pod of its manager Deployment, labelled as
// config/manager labels it, in capkv-system.
var ProviderEndpoint = ProcessEndpoint("capkv-system", "capkv-controller-manager",
	map[string]string{"control-plane": "capkv-controller-manager"})

// Reachable says whether the NetworkPolicies in force let a connection
// from one endpoint to another's protocol and port through.
func (s *Simulator) Reachable(ctx context.Context, from, to Endpoint, protocol string, port int32) (bool, error) {
	if s.client == nil {
		// Not set up with a manager (a unit test's): no API server, so no
		// policies.
		return true, nil
	}
	engine := eval.NewPolicyEngine()
	seen := map[string]bool{}
	src, err := s.insertEndpoint(ctx, engine, from, seen)
	if err != nil {
		return false, fmt.Errorf("connection source %s: %w", from, err)
	}
	dst, err := s.insertEndpoint(ctx, engine, to, seen)
	if err != nil {
		return false, fmt.Errorf("connection destination %s: %w", to, err)
	}
	return engine.CheckIfAllowed(src, dst, protocol, strconv.Itoa(int(port)))
}

// Connect opens a connection the way the network would: one the policies
// refuse is dropped, so it waits until ctx ends and fails with an i/o
// timeout, as a TCP connect whose SYNs go unanswered does.
func (s *Simulator) Connect(ctx context.Context, from, to Endpoint, protocol string, port int32) error {
	ok, err := s.Reachable(ctx, from, to, protocol, port)
	if err != nil || ok {
		return err
	}
	<-ctx.Done()
	addr := &net.TCPAddr{Port: int(port)}
	if ip, perr := netip.ParseAddr(to.IP); perr == nil {
		addr.IP = ip.AsSlice()
	}
	return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.ErrDeadlineExceeded}
}

// GuestEndpoint is where a guest's connections come from: its launcher
// pod when it has a pod network (masquerade or bridge to the pod's
// interface, both behind the pod's policies), else its first address on
// another network, where no NetworkPolicy applies.
func (s *Simulator) GuestEndpoint(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (Endpoint, error) {
	for _, n := range vmi.Spec.Networks {
		if n.Pod == nil {
			continue
		}
		pod, err := s.launcherPod(ctx, vmi)
		if err != nil {
			return Endpoint{}, err
		}
		if pod == nil {
			return Endpoint{}, fmt.Errorf("VMI %s/%s has no running launcher pod", vmi.Namespace, vmi.Name)
		}
		return PodEndpoint(client.ObjectKeyFromObject(pod)), nil
	}
	for _, iface := range vmi.Status.Interfaces {
		if iface.IP != "" {
			return AddressEndpoint(iface.IP), nil
		}
	}
	return Endpoint{}, fmt.Errorf("VMI %s/%s has no address yet", vmi.Namespace, vmi.Name)
}

// insertEndpoint adds what the engine needs to judge e to it (the pod, its
// namespace and that namespace's policies) and returns e as the engine
// names it: "namespace/name", or an address no pod holds.
func (s *Simulator) insertEndpoint(ctx context.Context, engine *eval.PolicyEngine, e Endpoint, seen map[string]bool) (string, error) {
	var pod *corev1.Pod
	switch {
	case e.IP != "":
		found, err := s.podAt(ctx, e.IP)
		if err != nil || found == nil {
			return e.IP, err
		}
		pod = found
	case e.Labels != nil:
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Pod.Namespace, Name: e.Pod.Name, Labels: e.Labels}}
	default:
		pod = &corev1.Pod{}
		if err := s.client.Get(ctx, e.Pod, pod); err != nil {
			return "", err
		}
	}
	if err := engine.InsertObject(s.policyView(pod)); err != nil {
		return "", err
	}
	if err := s.insertNamespace(ctx, engine, pod.Namespace, seen); err != nil {
		return "", err
	}
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}.String(), nil
}

// insertNamespace adds a namespace and its policies once.
func (s *Simulator) insertNamespace(ctx context.Context, engine *eval.PolicyEngine, name string, seen map[string]bool) error {
	if seen[name] {
		return nil
	}
	seen[name] = true
	ns := &corev1.Namespace{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: name}, ns); apierrors.IsNotFound(err) {
		// A process's namespace need not exist; the API server would have
		// labelled it like this.
		ns.Name = name
	} else if err != nil {
		return err
	}
	view := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for k, v := range ns.Labels {
		view.Labels[k] = v
	}
	view.Labels[corev1.LabelMetadataName] = name
	if err := engine.InsertObject(view); err != nil {
		return err
	}
	policies := &networkingv1.NetworkPolicyList{}
	if err := s.client.List(ctx, policies, client.InNamespace(name)); err != nil {
		return err
	}
	for i := range policies.Items {
		if !policies.Items[i].DeletionTimestamp.IsZero() {
			continue
		}
		if err := engine.InsertObject(&policies.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// policyView is what of a pod policies look at: its name, labels, ports
// and addresses. Owners are left out, as the engine groups pods by them
// for other analyses. A process standing in for a pod gets an address of
// the pod network that the simulator never hands out.
func (s *Simulator) policyView(pod *corev1.Pod) *corev1.Pod {
	view := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels}}
	for _, c := range pod.Spec.Containers {
		view.Spec.Containers = append(view.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
	}
	view.Status.PodIPs, view.Status.HostIP = pod.Status.PodIPs, pod.Status.HostIP
	if len(view.Status.PodIPs) == 0 {
		view.Status.PodIPs = []corev1.PodIP{{IP: s.ips.reserved()}}
	}
	if view.Status.HostIP == "" {
		view.Status.HostIP = processHostIP
	}
	return view
}

// processHostIP is the node address of processes standing in for pods: a
// documentation address, on no simulated node.
const processHostIP = "192.0.2.254"

// podAt finds the pod holding ip on the pod network, if any. Pods on their
// node's network share its addresses and are left out.
func (s *Simulator) podAt(ctx context.Context, ip string) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, podIP := range p.Status.PodIPs {
			if podIP.IP == ip {
				return p, nil
			}
		}
	}
	return nil, nil
}

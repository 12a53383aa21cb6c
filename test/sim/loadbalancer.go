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
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// LoadBalancerBackend tells the simulated load balancer where the traffic
// of a Service port goes: the world maps a tenant's control-plane Service to
// that tenant's in-memory API server. ok is false while there is no backend.
type LoadBalancerBackend interface {
	Backend(ctx context.Context, svc *corev1.Service, port corev1.ServicePort) (addr string, ok bool)
}

// LoadBalancerServer is a LoadBalancerBackend that serves a Service port on
// the load balancer's own address itself, instead of behind a plain TCP
// forwarder: the world terminates TLS there with a certificate for that
// address, as a tenant's API server behind a load balancer has.
// served false falls back to forwarding.
type LoadBalancerServer interface {
	ServeOn(ctx context.Context, svc *corev1.Service, port corev1.ServicePort, ip string) (served bool, err error)
}

// loadBalancer gives each LoadBalancer Service its own loopback address
// (all of 127.0.0.0/8 is loopback on Linux) and forwards each of its ports
// to the backend, as a cloud load balancer would.
type loadBalancer struct {
	mu        sync.Mutex
	addresses map[types.NamespacedName]string
	listeners map[string]net.Listener // by address:port
	next      int
	seeded    bool
	// inUse are addresses another process on this machine listens on
	// (another test world): skipped when allocating.
	inUse map[string]bool
}

func newLoadBalancer() *loadBalancer {
	return &loadBalancer{addresses: map[types.NamespacedName]string{}, listeners: map[string]net.Listener{}, inUse: map[string]bool{}}
}

// SetLoadBalancer turns the load-balancer implementation on or off: while
// off, LoadBalancer Services reconciled get no address, as on an infra
// cluster without MetalLB or the like (their cluster IP and node ports are
// served); addresses already given stay, and a Service reconciled while
// off gets one only when it next changes.
func (s *Simulator) SetLoadBalancer(on bool) { s.lbOff.Store(!on) }

// SetLoadBalancerIn turns the load-balancer implementation on or off for
// the Services of one namespace, as SetLoadBalancer does for all: as a
// MetalLB address pool limited to some namespaces
// (IPAddressPool.spec.serviceAllocation.namespaces) serves no other. A
// spec checks a cluster without a load balancer beside clusters that have
// one.
func (s *Simulator) SetLoadBalancerIn(namespace string, on bool) {
	if on {
		s.lbOffIn.Delete(namespace)
		return
	}
	s.lbOffIn.Store(namespace, true)
}

// loadBalancerOff tells whether Services of the namespace get no address.
func (s *Simulator) loadBalancerOff(namespace string) bool {
	_, off := s.lbOffIn.Load(namespace)
	return off || s.lbOff.Load()
}

func (s *Simulator) setupLoadBalancer(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-loadbalancer").
		For(&corev1.Service{}).
		Complete(reconcile.Func(s.reconcileService))
}

func (s *Simulator) reconcileService(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	err := s.client.Get(ctx, req.NamespacedName, svc)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	if err == nil && svc.DeletionTimestamp.IsZero() && (svc.Spec.Type == corev1.ServiceTypeClusterIP || svc.Spec.Type == corev1.ServiceTypeNodePort) {
		s.lb.release(req.NamespacedName)
		if err := s.serveClusterIP(ctx, svc); err != nil || svc.Spec.Type != corev1.ServiceTypeNodePort {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, s.serveNodePorts(ctx, svc)
	}
	if err != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !svc.DeletionTimestamp.IsZero() {
		s.lb.release(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	// kube-proxy serves a LoadBalancer Service's cluster IP as any
	// Service's.
	if err := s.serveClusterIP(ctx, svc); err != nil {
		return reconcile.Result{}, err
	}
	if s.loadBalancerOff(svc.Namespace) {
		// A bare-metal cluster without a load-balancer implementation:
		// the Service waits for an address forever; kube-proxy serves its
		// node ports.
		return reconcile.Result{}, s.serveNodePorts(ctx, svc)
	}
	if err := s.lb.seed(func() ([]corev1.Service, error) {
		list := &corev1.ServiceList{}
		err := s.client.List(ctx, list)
		return list.Items, err
	}); err != nil {
		return reconcile.Result{}, err
	}
	ip := s.lb.address(req.NamespacedName)
	err = s.serve(ctx, svc, ip)
	if errors.Is(err, syscall.EADDRINUSE) && IngressIP(svc) != ip {
		// Another world on this machine (test packages run in parallel
		// processes) took the address first; a Service that has not
		// published it yet takes another.
		s.lb.skip(req.NamespacedName, ip)
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	before := svc.Status.DeepCopy()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if equality.Semantic.DeepEqual(before, &svc.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, s.client.Status().Update(ctx, svc)
}

// serveClusterIP serves the ClusterIP of a tenant's control-plane Service,
// as kube-proxy would for clients on the infra cluster's nodes (and the
// management cluster, when it is the infra cluster): the world's
// LoadBalancerServer serves the tenant's API server there. The world's
// ClusterIPs are on loopback (testenv), so nothing leaves the machine;
// other ClusterIP Services are not the simulator's to serve.
func (s *Simulator) serveClusterIP(ctx context.Context, svc *corev1.Service) error {
	server, ok := s.LBBackend.(LoadBalancerServer)
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if !ok || ip == nil || !ip.IsLoopback() {
		return nil
	}
	for _, port := range svc.Spec.Ports {
		if _, err := server.ServeOn(ctx, svc, port, svc.Spec.ClusterIP); err != nil {
			return err
		}
	}
	return nil
}

// serveNodePorts serves the node ports of a tenant's NodePort
// control-plane Service on every node with a loopback address (the
// world's infra nodes), as kube-proxy does on each node.
func (s *Simulator) serveNodePorts(ctx context.Context, svc *corev1.Service) error {
	server, ok := s.LBBackend.(LoadBalancerServer)
	if !ok {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := s.client.List(ctx, nodes); err != nil {
		return err
	}
	for _, node := range nodes.Items {
		for _, a := range node.Status.Addresses {
			ip := net.ParseIP(a.Address)
			if a.Type != corev1.NodeInternalIP || ip == nil || !ip.IsLoopback() {
				continue
			}
			for _, port := range svc.Spec.Ports {
				if port.NodePort == 0 {
					continue
				}
				onNode := port
				onNode.Port = port.NodePort
				if _, err := server.ServeOn(ctx, svc, onNode, a.Address); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// serve makes ip forward every port of the Service: through the world's
// LoadBalancerServer where it takes the port, else through a listener of
// the simulator.
func (s *Simulator) serve(ctx context.Context, svc *corev1.Service, ip string) error {
	key := client.ObjectKeyFromObject(svc)
	for _, port := range svc.Spec.Ports {
		if server, ok := s.LBBackend.(LoadBalancerServer); ok && !s.lb.listening(ip, port) {
			served, err := server.ServeOn(ctx, svc, port, ip)
			if err != nil {
				return err
			}
			if served {
				continue
			}
		}
		if err := s.lb.listen(ctx, ip, port, func(ctx context.Context) (string, bool) {
			if s.LBBackend == nil {
				return "", false
			}
			current := &corev1.Service{}
			if err := s.client.Get(ctx, key, current); err != nil {
				return "", false
			}
			return s.LBBackend.Backend(ctx, current, port)
		}); err != nil {
			return err
		}
	}
	return nil
}

// address returns the Service's loopback address, 127.1.x.y, allocating one
// on first use.
func (lb *loadBalancer) address(key types.NamespacedName) string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if ip, ok := lb.addresses[key]; ok {
		return ip
	}
	taken := map[string]bool{}
	for _, ip := range lb.addresses {
		taken[ip] = true
	}
	ip := ""
	for ip == "" || taken[ip] || lb.inUse[ip] {
		lb.next++
		ip = fmt.Sprintf("127.1.%d.%d", lb.next/250, lb.next%250+1)
	}
	lb.addresses[key] = ip
	return ip
}

// seed keeps, once, the addresses Services already have (the world
// restarted from kept state): clients and Cluster API's control-plane
// endpoints know them by these, so none may go to another Service.
func (lb *loadBalancer) seed(list func() ([]corev1.Service, error)) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.seeded {
		return nil
	}
	services, err := list()
	if err != nil {
		return err
	}
	taken := map[string]bool{}
	for i := range services {
		svc := &services[i]
		if ip := IngressIP(svc); svc.Spec.Type == corev1.ServiceTypeLoadBalancer && strings.HasPrefix(ip, "127.1.") && !taken[ip] {
			lb.addresses[client.ObjectKeyFromObject(svc)] = ip
			taken[ip] = true
		}
	}
	lb.seeded = true
	return nil
}

// IngressIP is the first IP of a Service's load balancer ingress, or "".
func IngressIP(svc *corev1.Service) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
	}
	return ""
}

// listening reports whether the load balancer forwards ip:port itself.
func (lb *loadBalancer) listening(ip string, port corev1.ServicePort) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	_, ok := lb.listeners[net.JoinHostPort(ip, fmt.Sprint(port.Port))]
	return ok
}

func (lb *loadBalancer) listen(ctx context.Context, ip string, port corev1.ServicePort, backend func(context.Context) (string, bool)) error {
	addr := net.JoinHostPort(ip, fmt.Sprint(port.Port))
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if _, ok := lb.listeners[addr]; ok {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("load balancer listening on %s: %w", addr, err)
	}
	lb.listeners[addr] = l
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go Forward(ctx, conn, backend)
		}
	}()
	return nil
}

// Forward connects a client to the address backend names, copying both
// ways until one side closes; with no backend the connection is closed, as
// a Service without endpoints refuses it.
func Forward(ctx context.Context, conn net.Conn, backend func(context.Context) (string, bool)) {
	defer conn.Close()
	target, ok := backend(ctx)
	if !ok {
		return
	}
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

// release closes the listeners of a Service that is gone or no longer a
// LoadBalancer.
// skip gives up the Service's address because another process holds it,
// so that the next reconcile allocates another.
func (lb *loadBalancer) skip(key types.NamespacedName, ip string) {
	lb.release(key)
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.inUse[ip] = true
}

func (lb *loadBalancer) release(key types.NamespacedName) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	ip, ok := lb.addresses[key]
	if !ok {
		return
	}
	for addr, l := range lb.listeners {
		if host, _, _ := net.SplitHostPort(addr); host == ip {
			_ = l.Close()
			delete(lb.listeners, addr)
		}
	}
	delete(lb.addresses, key)
}

// Close stops every load balancer listener.
func (lb *loadBalancer) Close() error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var errs []error
	for addr, l := range lb.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		delete(lb.listeners, addr)
	}
	return errors.Join(errs...)
}

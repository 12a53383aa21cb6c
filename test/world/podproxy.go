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
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// reconcileService serves, as kube-proxy does, the ClusterIP of a Service
// that selects the runner's pods (the provider's webhook Service, which the
// API server calls): each port listens on ClusterIP:port, on loopback, and
// forwards every connection to a ready pod's IP and target port.
func (r *PodRunner) reconcileService(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	err := r.c.Get(ctx, req.NamespacedName, svc)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	selects, selErr := r.selectsOwnPods(ctx, svc)
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if err != nil || selErr != nil || !selects || ip == nil || !ip.IsLoopback() || !svc.DeletionTimestamp.IsZero() {
		r.closeService(req.NamespacedName)
		return reconcile.Result{}, selErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.services[req.NamespacedName]) == len(svc.Spec.Ports) {
		return reconcile.Result{}, nil
	}
	for _, l := range r.services[req.NamespacedName] {
		_ = l.Close()
	}
	listeners := make([]net.Listener, 0, len(svc.Spec.Ports))
	for _, port := range svc.Spec.Ports {
		l, err := net.Listen("tcp", net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(port.Port))) //nolint:noctx // lives as long as the Service
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return reconcile.Result{}, fmt.Errorf("serving the ClusterIP of Service %s: %w", req.NamespacedName, err)
		}
		listeners = append(listeners, l)
		go r.accept(l, req.NamespacedName, port) //nolint:gosec // connections outlive the reconcile that opened the listener
	}
	r.services[req.NamespacedName] = listeners
	return reconcile.Result{}, nil
}

// selectsOwnPods reports whether the Service's selector matches the pods of
// the runner's Deployment.
func (r *PodRunner) selectsOwnPods(ctx context.Context, svc *corev1.Service) (bool, error) {
	if svc.Namespace != r.deployment.Namespace || len(svc.Spec.Selector) == 0 {
		return false, nil
	}
	pods, err := r.ownPods(ctx)
	if err != nil {
		return false, err
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for i := range pods {
		if sel.Matches(labels.Set(pods[i].Labels)) {
			return true, nil
		}
	}
	return false, nil
}

func (r *PodRunner) closeService(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.services[key] {
		_ = l.Close()
	}
	delete(r.services, key)
}

func (r *PodRunner) accept(l net.Listener, svc types.NamespacedName, port corev1.ServicePort) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go sim.Forward(context.Background(), conn, func(ctx context.Context) (string, bool) { return r.endpoint(ctx, svc, port) })
	}
}

// endpoint is a ready pod's IP and the Service port's target port.
func (r *PodRunner) endpoint(ctx context.Context, key types.NamespacedName, port corev1.ServicePort) (string, bool) {
	svc := &corev1.Service{}
	if err := r.c.Get(ctx, key, svc); err != nil {
		return "", false
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	r.mu.Lock()
	defer r.mu.Unlock()
	pods, err := r.ownPods(ctx)
	if err != nil {
		return "", false
	}
	for i := range pods {
		pod := &pods[i]
		ctr := r.pods[client.ObjectKeyFromObject(pod)]
		if ctr == nil || !ctr.ready.Load() || ctr.uid != pod.UID || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		target := port.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target.IntVal = port.Port
		}
		if p, ok := containerPort(&pod.Spec.Containers[0], target); ok {
			return net.JoinHostPort(ctr.ip, fmt.Sprint(p)), true
		}
	}
	return "", false
}

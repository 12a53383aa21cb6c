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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// What the CCM's load balancer (cloud-provider-kubevirt
// pkg/provider/loadbalancer.go) and Kubernetes' service controller
// (k8s.io/cloud-provider controllers/service/controller.go) put on objects.
const (
	loadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"
	tenantServiceNameLabel       = "cluster.x-k8s.io/tenant-service-name"
	tenantServiceNamespaceLabel  = "cluster.x-k8s.io/tenant-service-namespace"
	clusterNameLabel             = "cluster.x-k8s.io/cluster-name"
	roleLabel                    = "cluster.x-k8s.io/role"
)

// wantsLoadBalancer says whether the service controller handles a tenant
// Service: type LoadBalancer and no other load-balancer class, or a
// Service it handled that is going.
func wantsLoadBalancer(svc *corev1.Service) bool {
	ours := svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
	return ours || controllerutil.ContainsFinalizer(svc, loadBalancerCleanupFinalizer)
}

// syncLoadBalancer brings one tenant Service's infra Service where the
// service controller and the CCM would: made and its address copied back
// while the Service wants one, deleted (and the cleanup finalizer taken
// off) once it does not. An infra Service that has no address yet is
// looked at again the next second, as the CCM polls for it.
func (cc *cloudController) syncLoadBalancer(ctx context.Context, c inmemoryruntime.Client, access infraAccess, clusterName string, svc *corev1.Service) error {
	if svc.UID == "" {
		// Its infra Service is named after the UID: without one, two
		// Services would share it.
		return fmt.Errorf("tenant Service %s/%s has no UID", svc.Namespace, svc.Name)
	}
	key := types.NamespacedName{Namespace: access.namespace, Name: loadBalancerName(svc)}
	infraSvc := &corev1.Service{}
	err := access.client.Get(ctx, key, infraSvc)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting infra Service %s: %w", key, err)
	}
	found := err == nil
	going := !svc.DeletionTimestamp.IsZero() || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil
	if going {
		if found {
			if err := access.client.Delete(ctx, infraSvc); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting infra Service %s: %w", key, err)
			}
		}
		controllerutil.RemoveFinalizer(svc, loadBalancerCleanupFinalizer)
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
		return updateReleasing(ctx, c, svc)
	}
	if controllerutil.AddFinalizer(svc, loadBalancerCleanupFinalizer) {
		if err := c.Update(ctx, svc); err != nil {
			return err
		}
	}
	ports := infraPorts(svc)
	switch {
	case !found:
		infraSvc = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: svc.Annotations,
				Labels: map[string]string{tenantServiceNameLabel: svc.Name, tenantServiceNamespaceLabel: svc.Namespace, clusterNameLabel: clusterName}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports, ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
				Selector:    map[string]string{roleLabel: "worker", clusterNameLabel: clusterName},
				ExternalIPs: svc.Spec.ExternalIPs, LoadBalancerIP: svc.Spec.LoadBalancerIP, HealthCheckNodePort: svc.Spec.HealthCheckNodePort},
		}
		if err := access.client.Create(ctx, infraSvc); err != nil {
			return fmt.Errorf("creating infra Service %s: %w", key, err)
		}
		return nil
	case !equality.Semantic.DeepEqual(infraSvc.Spec.Ports, ports):
		infraSvc.Spec.Ports = ports
		if err := access.client.Update(ctx, infraSvc); err != nil {
			return fmt.Errorf("updating infra Service %s: %w", key, err)
		}
	}
	if len(infraSvc.Status.LoadBalancer.Ingress) == 0 || equality.Semantic.DeepEqual(svc.Status.LoadBalancer, infraSvc.Status.LoadBalancer) {
		return nil
	}
	svc.Status.LoadBalancer = infraSvc.Status.LoadBalancer
	return c.Update(ctx, svc)
}

// loadBalancerName is k8s.io/cloud-provider's DefaultLoadBalancerName: "a"
// and the Service's UID without dashes, at most 32 characters.
func loadBalancerName(svc *corev1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	return name[:min(len(name), 32)]
}

// infraPorts are the tenant Service's ports, each targeting its node port
// on the tenant's worker VMs.
func infraPorts(svc *corev1.Service) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.NodePort)})
	}
	return ports
}

// pendingLoadBalancers are the tenant Services the service controller has
// work on: one without its finalizer or address, or one that is going.
func pendingLoadBalancers(services []corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	for i := range services {
		svc := &services[i]
		if !wantsLoadBalancer(svc) {
			continue
		}
		settled := svc.DeletionTimestamp.IsZero() && svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
			controllerutil.ContainsFinalizer(svc, loadBalancerCleanupFinalizer) && len(svc.Status.LoadBalancer.Ingress) > 0
		if !settled {
			out = append(out, svc)
		}
	}
	return slices.Clip(out)
}

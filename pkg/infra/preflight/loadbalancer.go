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

package preflight

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/controlplaneservice"
)

// Reasons of the load-balancer findings.
const (
	LoadBalancerAvailableReason = "LoadBalancerAvailable"
	NoLoadBalancerReason        = "NoLoadBalancer"
	NoLoadBalancerSeenReason    = "NoLoadBalancerSeen"
)

// pendingLongEnough is how long a LoadBalancer Service may wait for its
// address before its wait counts as evidence that nothing fills it.
const pendingLongEnough = 5 * time.Minute

// noLoadBalancerEffect is what a missing implementation means here.
const noLoadBalancerEffect = "the default control-plane endpoint, a LoadBalancer Service, gets no address and falls back after " +
	"--load-balancer-fallback-after to the Service's cluster IP (reachable only inside the infra cluster) or a node port; " +
	"install a load-balancer implementation (MetalLB, kube-vip, a cloud's) or use the nodeport flavor (docs/clusters.md)"

// loadBalancerFinding says whether a load-balancer implementation fills
// LoadBalancer Services. With the probe it creates a Service of its own:
// an address given today is the proof (an address given long ago says
// nothing of an exhausted address pool). Without it, an address on any
// Service hints at an implementation, and one that has waited long at
// none.
func loadBalancerFinding(ctx context.Context, c client.Client, o Options) Finding {
	if o.ProbeLoadBalancer {
		return probe(ctx, c, o)
	}
	list := &corev1.ServiceList{}
	if err := c.List(ctx, list); err != nil {
		return Finding{"load-balancer", Warning, ReadFailedReason, "listing Services: " + err.Error()}
	}
	var pending *corev1.Service
	for i, svc := range list.Items {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if addr := controlplaneservice.IngressAddress(&svc); addr != "" {
			return Finding{"load-balancer", OK, LoadBalancerAvailableReason,
				fmt.Sprintf("LoadBalancer Service %s/%s has the address %s", svc.Namespace, svc.Name, addr)}
		}
		if time.Since(svc.CreationTimestamp.Time) > pendingLongEnough {
			pending = &list.Items[i]
		}
	}
	if pending != nil {
		return Finding{"load-balancer", Warning, NoLoadBalancerReason, fmt.Sprintf("LoadBalancer Service %s/%s has waited %s for an address: %s",
			pending.Namespace, pending.Name, time.Since(pending.CreationTimestamp.Time).Round(time.Second), noLoadBalancerEffect)}
	}
	return Finding{"load-balancer", Info, NoLoadBalancerSeenReason,
		"no LoadBalancer Service has an address yet; `manager preflight` probes with a Service of its own"}
}

// probe creates a LoadBalancer Service, waits for its address and deletes
// it again.
func probe(ctx context.Context, c client.Client, o Options) Finding {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "capkv-preflight-", Namespace: o.ProbeNamespace,
			Labels: map[string]string{"app.kubernetes.io/name": "capkv-preflight"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "probe", Port: 6443, Protocol: corev1.ProtocolTCP}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return Finding{"load-balancer", Warning, ReadFailedReason, fmt.Sprintf("creating a probe LoadBalancer Service in %s: %v", o.ProbeNamespace, err)}
	}
	f := waitForAddress(ctx, c, svc, o.ProbeTimeout)
	// The probe goes even when the run was cancelled: a leaked one may
	// hold an address of the load balancer's pool.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Delete(cleanup, svc); client.IgnoreNotFound(err) != nil {
		f.Message += fmt.Sprintf("; deleting the probe Service failed, delete %s/%s yourself: %v", svc.Namespace, svc.Name, err)
	}
	return f
}

// waitForAddress waits for the probe Service's address.
func waitForAddress(ctx context.Context, c client.Client, svc *corev1.Service, timeout time.Duration) Finding {
	var addr string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			// A Service deleted under the probe ends it; anything else
			// (the client's rate limiter near the deadline) is tried again.
			if apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		addr = controlplaneservice.IngressAddress(svc)
		return addr != "", nil
	})
	if addr != "" {
		return Finding{"load-balancer", OK, LoadBalancerAvailableReason,
			fmt.Sprintf("the probe LoadBalancer Service %s/%s got the address %s", svc.Namespace, svc.Name, addr)}
	}
	if ctx.Err() != nil || err != nil && !wait.Interrupted(err) {
		return Finding{"load-balancer", Warning, ReadFailedReason, fmt.Sprintf("waiting for the probe Service %s/%s: %v", svc.Namespace, svc.Name, errors.Join(err, ctx.Err()))}
	}
	return Finding{"load-balancer", Warning, NoLoadBalancerReason, fmt.Sprintf("the probe LoadBalancer Service %s/%s got no address in %s: %s",
		svc.Namespace, svc.Name, timeout, noLoadBalancerEffect)}
}

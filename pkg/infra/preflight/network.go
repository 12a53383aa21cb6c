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
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/isolation"
)

// Reasons of the DNS findings.
const (
	DNSOpenReason     = "DNSOpen"
	DNSBlockedReason  = "DNSBlocked"
	DNSNotFoundReason = "DNSNotFound"
)

// dnsNamespaces are where cluster DNS Services live: kube-system
// (kube-dns, CoreDNS, NodeLocal DNSCache) and OpenShift's openshift-dns.
var dnsNamespaces = []string{metav1.NamespaceSystem, "openshift-dns"}

// nodeLocalDNS is NodeLocal DNSCache's DaemonSet in its documented
// install (kubernetes.io, "Using NodeLocal DNSCache in Kubernetes
// Clusters").
var nodeLocalDNS = client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "node-local-dns"}

// dnsSetup is what the DNS check reads.
type dnsSetup struct {
	// services are the Services on port 53 in dnsNamespaces.
	services []corev1.Service
	// namespaceLabels are the labels of each namespace of services.
	namespaceLabels map[string]map[string]string
	// nodeLocalAddresses are where NodeLocal DNSCache listens, if it runs.
	nodeLocalAddresses []string
}

func readDNS(ctx context.Context, c client.Client) (dnsSetup, error) {
	d := dnsSetup{namespaceLabels: map[string]map[string]string{}}
	for _, ns := range dnsNamespaces {
		list := &corev1.ServiceList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return d, fmt.Errorf("listing Services in %s: %w", ns, err)
		}
		for _, svc := range list.Items {
			if len(svc.Spec.Selector) > 0 && slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 53 }) {
				d.services = append(d.services, svc)
			}
		}
		namespace := &corev1.Namespace{}
		switch err := c.Get(ctx, client.ObjectKey{Name: ns}, namespace); {
		case err == nil:
			d.namespaceLabels[ns] = namespace.Labels
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			// The API server labels every namespace with its name.
			d.namespaceLabels[ns] = map[string]string{corev1.LabelMetadataName: ns}
		default:
			return d, err
		}
	}
	ds := &appsv1.DaemonSet{}
	switch err := c.Get(ctx, nodeLocalDNS, ds); {
	case err == nil:
		d.nodeLocalAddresses = localIPs(ds)
	case !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err):
		return d, err
	}
	return d, nil
}

// localIPs reads node-cache's -localip flag: the addresses it answers on.
func localIPs(ds *appsv1.DaemonSet) []string {
	for _, ctr := range ds.Spec.Template.Spec.Containers {
		args := append(append([]string(nil), ctr.Command...), ctr.Args...)
		for i, arg := range args {
			value, ok := strings.CutPrefix(strings.TrimLeft(arg, "-"), "localip")
			switch {
			case !ok:
				continue
			case strings.HasPrefix(value, "="):
				return strings.Split(value[1:], ",")
			case value == "" && i+1 < len(args):
				return strings.Split(args[i+1], ",")
			}
		}
	}
	return nil
}

// dnsFindings says whether the isolation policies' default DNS rules open
// the cluster's DNS to guests. A Service's selector is a subset of its
// pods' labels, so a rule whose pod selector matches the selector matches
// every pod behind it. Policies see the target port; a named one (a
// container port's name) is taken as opened.
func dnsFindings(d dnsSetup, err error) []Finding {
	if err != nil {
		return []Finding{{"dns", Warning, ReadFailedReason, err.Error()}}
	}
	rules := isolation.DefaultDNSRules()
	var out []Finding
	for _, svc := range d.services {
		name := svc.Namespace + "/" + svc.Name
		if opens(rules, d.namespaceLabels[svc.Namespace], svc.Spec.Selector, dnsTargetPort(svc)) {
			out = append(out, Finding{"dns", OK, DNSOpenReason, fmt.Sprintf(
				"the isolation policies open DNS Service %s's pods (%s) to guests", name, labels.Set(svc.Spec.Selector))})
			continue
		}
		out = append(out, Finding{"dns", Warning, DNSBlockedReason, fmt.Sprintf(
			"DNS Service %s selects pods labelled %s, which the isolation policies' default DNS rules (kube-system pods labelled k8s-app=kube-dns, "+
				"OpenShift's DNS pods, %s) do not open: guests of isolated clusters cannot resolve names through it; "+
				"name its pods in spec.isolation.dnsResolvers", name, labels.Set(svc.Spec.Selector), isolation.NodeLocalDNSAddress)})
	}
	var closed []string
	for _, ip := range d.nodeLocalAddresses {
		switch ip = strings.TrimSpace(ip); ip {
		case "":
		case isolation.NodeLocalDNSAddress:
			out = append(out, Finding{"dns", OK, DNSOpenReason, fmt.Sprintf(
				"the isolation policies open NodeLocal DNSCache's %s to guests", ip)})
		default:
			closed = append(closed, ip)
		}
	}
	if len(closed) > 0 {
		out = append(out, Finding{"dns", Warning, DNSBlockedReason, fmt.Sprintf(
			"NodeLocal DNSCache (%s) also answers on %s, which the isolation policies do not open: where kubelets name it as the cluster DNS, "+
				"guests of isolated clusters cannot resolve names; add it to spec.isolation.dnsResolvers (with the defaults it still needs)",
			nodeLocalDNS, strings.Join(closed, ", "))})
	}
	if len(d.services) == 0 && len(d.nodeLocalAddresses) == 0 {
		out = append(out, Finding{"dns", Warning, DNSNotFoundReason, fmt.Sprintf(
			"found no DNS Service (port 53 in %s) and no NodeLocal DNSCache: the isolation policies open DNS only to kube-system pods labelled k8s-app=kube-dns, "+
				"OpenShift's DNS pods and %s; if guests resolve elsewhere, name it in spec.isolation.dnsResolvers", strings.Join(dnsNamespaces, ", "), isolation.NodeLocalDNSAddress)})
	}
	return out
}

// dnsTargetPort is the numeric target port of a DNS Service's port 53,
// 0 when it is named.
func dnsTargetPort(svc corev1.Service) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Port != 53 {
			continue
		}
		if p.TargetPort.Type == intstr.Int {
			if p.TargetPort.IntVal == 0 {
				return 53
			}
			return p.TargetPort.IntVal
		}
		return 0
	}
	return 0
}

// opens says whether any rule opens the target port (0: any) of the pods
// the Service's selector selects in a namespace with nsLabels.
func opens(rules []networkingv1.NetworkPolicyEgressRule, nsLabels, selector map[string]string, target int32) bool {
	for _, rule := range rules {
		if target != 0 && len(rule.Ports) > 0 && !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			return p.Port != nil && p.Port.Type == intstr.Int && p.Port.IntVal == target
		}) {
			continue
		}
		for _, peer := range rule.To {
			if peer.PodSelector == nil || peer.NamespaceSelector == nil {
				continue
			}
			nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err != nil || !nsSel.Matches(labels.Set(nsLabels)) {
				continue
			}
			podSel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err == nil && podSel.Matches(labels.Set(selector)) {
				return true
			}
		}
	}
	return false
}

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
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrlkubeconfig "sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TenantUIDs are the UIDs of the VMs, VMIs, DataVolumes and Services in a
// namespace of the infra cluster, sorted, by kind: equal sets before and
// after an operation mean nothing of the tenant was recreated.
func TenantUIDs(ctx context.Context, infra client.Reader, ns string) (map[string][]string, error) {
	uids := map[string][]string{}
	for kind, list := range map[string]client.ObjectList{"VirtualMachine": &kubevirtv1.VirtualMachineList{},
		"VirtualMachineInstance": &kubevirtv1.VirtualMachineInstanceList{}, "DataVolume": &cdiv1.DataVolumeList{}, "Service": &corev1.ServiceList{}} {
		if err := infra.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			if obj, ok := item.(client.Object); ok {
				uids[kind] = append(uids[kind], string(obj.GetUID()))
			}
		}
		sort.Strings(uids[kind])
	}
	return uids, nil
}

// MachinesWithNodes summarizes a namespace's Machines as "N machines, M
// with a Node", for an Eventually to compare.
func MachinesWithNodes(ctx context.Context, mgmt client.Reader, ns string) (string, error) {
	machines := &clusterv1.MachineList{}
	if err := mgmt.List(ctx, machines, client.InNamespace(ns)); err != nil {
		return "", err
	}
	withNode := 0
	for _, m := range machines.Items {
		if m.Status.NodeRef.IsDefined() {
			withNode++
		}
	}
	return fmt.Sprintf("%d machines, %d with a Node", len(machines.Items), withNode), nil
}

// TenantClient reaches a tenant cluster with the kubeconfig Cluster API
// wrote for it on the management cluster, as its users do; it also returns
// the server's address.
func TenantClient(ctx context.Context, mgmt client.Reader, ns, cluster string) (client.Client, string, error) {
	kubeconfig, err := ctrlkubeconfig.FromSecret(ctx, mgmt, client.ObjectKey{Namespace: ns, Name: cluster})
	if err != nil {
		return nil, "", err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, "", err
	}
	wc, err := client.New(cfg, client.Options{})
	return wc, cfg.Host, err
}

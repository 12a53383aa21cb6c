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

package machine

import (
	"context"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/userdata"
)

// staticAddresses claims the machine's pool addresses and returns them with
// the files the guest needs for them: the kubelet's node address and, for
// Ignition guests, the networkd units (cloud-init guests get network config
// instead, see networkConfig). A nil outcome reason means all are bound.
func (s *Service) staticAddresses(ctx context.Context, sc *Scope, format string) ([]ipam.Assigned, []userdata.File, outcome.Outcome, error) {
	km := sc.KubevirtMachine
	if len(km.Spec.NetworkAddresses) == 0 {
		return nil, nil, outcome.Outcome{}, nil
	}
	claims := &ipam.Claims{Client: s.Client}
	assigned, wait, err := claims.Ensure(ctx, km, sc.Cluster.Name)
	if err != nil || wait.Reason != "" {
		return nil, nil, wait, err
	}
	var files []userdata.File
	if ip, ok := ipam.NodeIP(assigned, tenantnet.NodeAddressNetwork(sc.KubevirtCluster, km)); ok {
		files = append(files, userdata.File{Path: ipam.KubeletNodeIPPath, Mode: 0o644, Contents: ipam.KubeletNodeIPDropIn(ip)})
	}
	if format == userdata.FormatIgnition {
		mac := interfaceMAC(sc)
		for i := range assigned {
			path, contents := ipam.NetworkdUnit(ipam.Interface{Name: assigned[i].Network, MAC: mac(assigned[i].Network), Static: &assigned[i]})
			files = append(files, userdata.File{Path: path, Mode: 0o644, Contents: contents})
		}
	}
	return assigned, files, outcome.Outcome{}, nil
}

// interfaceMAC is the MAC of each VM network's interface: the template's,
// else the one the provider derives (ipam.MAC); nil for machines without
// networkAddresses, whose interfaces KubeVirt gives MACs as usual.
func interfaceMAC(sc *Scope) func(network string) string {
	km := sc.KubevirtMachine
	if len(km.Spec.NetworkAddresses) == 0 {
		return nil
	}
	ns, name := sc.VMNamespace(), sc.VMName()
	return func(network string) string {
		if tmpl := km.Spec.VirtualMachineTemplate.Spec.Template; tmpl != nil {
			for _, i := range tmpl.Spec.Domain.Devices.Interfaces {
				if i.Name == network && i.MacAddress != "" {
					return i.MacAddress
				}
			}
		}
		return ipam.MAC(ns, name, network)
	}
}

// networkConfig is the cloud-init network config of a guest with static
// addresses, for the VM's interfaces. A machine whose networkAddresses name
// a network the VM lacks fails here, before anything is created.
func networkConfig(data *bootstrapData, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	if len(data.assigned) == 0 || data.format == userdata.FormatIgnition || vm.Spec.Template == nil {
		return outcome.Outcome{}, nil
	}
	ifaces, err := ipam.Interfaces(&vm.Spec.Template.Spec, data.assigned)
	if err != nil {
		return outcome.Fail(infrav1.AddressNetworkInvalidReason, err.Error()), nil
	}
	cfg, err := ipam.CloudInitNetworkConfig(ifaces)
	if err != nil {
		return outcome.Outcome{}, fmt.Errorf("rendering network config: %w", err)
	}
	data.networkData = cfg
	return outcome.Outcome{}, nil
}

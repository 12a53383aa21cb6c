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
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

// interfaceMAC is the MAC the provider gives interfaces without one, for
// machines with networkAddresses, whose guest network configuration
// matches interfaces by MAC; nil for the others, whose interfaces KubeVirt
// gives MACs as usual.
func interfaceMAC(sc *Scope) func(network string) string {
	if len(sc.KubevirtMachine.Spec.NetworkAddresses) == 0 {
		return nil
	}
	return providerMACs(sc.VM)
}

// providerMACs gives each interface of the VM the MAC the provider derives
// from the VM's key and the interface's network.
func providerMACs(vm types.NamespacedName) func(network string) string {
	return func(network string) string { return ipam.MAC(vm.Namespace, vm.Name, network) }
}

// guestNetwork adds the pool addresses to the bootstrap data, for the
// VM's interfaces: cloud-init network config, or networkd units for
// Ignition guests, and the kubelet's node IP for both. A node-address
// network on Multus without a pool address gets the script that tells the
// kubelet its DHCP address, and a cloud-init guest without network config
// of the user's DHCP on every interface (see ipam.GuestNetwork). Only a VM
// about to be created (building) gets the provider's MACs; one that exists
// keeps its interfaces as they are. A machine whose networkAddresses name
// a network the VM lacks, or its pod network, fails here, before anything
// is created.
func guestNetwork(sc *Scope, data *bootstrapData, vm *kubevirtv1.VirtualMachine, building bool) outcome.Outcome {
	nodeNetwork := tenantnet.NodeAddressNetwork(sc.KubevirtCluster, sc.KubevirtMachine)
	if (len(data.assigned) == 0 && nodeNetwork == "") || vm.Spec.Template == nil {
		return outcome.Outcome{}
	}
	var macOf func(string) string
	if building {
		macOf = providerMACs(sc.VM)
	}
	files, networkData, err := ipam.GuestNetwork(&vm.Spec.Template.Spec, data.assigned, nodeNetwork, macOf,
		data.Format == userdata.FormatIgnition, data.NetworkData != nil)
	if err != nil {
		return outcome.Fail(infrav1.AddressNetworkInvalidReason, err.Error())
	}
	if len(files) == 0 && networkData == nil {
		return outcome.Outcome{}
	}
	if networkData != nil {
		data.NetworkData = networkData
		if building {
			vmbuilder.UseNetworkData(&vm.Spec.Template.Spec)
		}
	}
	add := data.additions
	add.Files = files
	rendered, invalid := data.Render(add)
	data.userData = rendered
	return invalid
}

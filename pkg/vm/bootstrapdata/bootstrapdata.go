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

// Package bootstrapdata reads what a VM boots from, for machines and pools
// alike: the bootstrap provider's data Secret, the user's network data
// Secret, and the keys and conflicts of the user data Secret the provider
// writes beside the VM. Secret contents never reach conditions, events or
// logs.
package bootstrapdata

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
)

// Keys of the user data Secret. KubeVirt reads "userdata" and "networkdata"
// (docs/kubevirt-behaviour.md#cloud-init-secret-keys); the host public key
// lets the ssh check verify the guest.
const (
	UserDataKey      = "userdata"
	NetworkDataKey   = "networkdata"
	HostPublicKeyKey = "ssh-host-key.pub"
)

// Data is the bootstrap data of a machine or pool, as its bootstrap
// provider wrote it, with the user's network data.
type Data struct {
	// Format is the bootstrap data's format: cloud-config or ignition.
	Format string
	// Raw is the bootstrap data as written, before the provider's additions.
	Raw []byte
	// NetworkData is the network data Secret's content, nil when none is
	// referenced.
	NetworkData []byte
	// SecretName names the bootstrap data Secret.
	SecretName string
}

// Read reads the bootstrap data Secret name (nil while the bootstrap
// provider has not named one) in namespace ns, and the network data Secret
// networkData names, if any. It returns nil, with an outcome saying why,
// while something is missing; owner names what waits (the Machine, the
// MachinePool).
func Read(ctx context.Context, c client.Client, ns string, name *string, networkData *corev1.LocalObjectReference, owner string) (*Data, outcome.Outcome, error) {
	if name == nil {
		return nil, Waiting(owner), nil
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: *name}, secret); client.IgnoreNotFound(err) != nil {
		return nil, outcome.Outcome{}, fmt.Errorf("reading bootstrap data Secret %s/%s: %w", ns, *name, err)
	}
	if len(secret.Data["value"]) == 0 {
		return nil, outcome.Wait(infrav1.WaitingForBootstrapDataReason,
			fmt.Sprintf("bootstrap data Secret %s does not exist yet or has no key \"value\"", *name)), nil
	}
	data := &Data{Format: string(secret.Data["format"]), Raw: secret.Data["value"], SecretName: *name}
	if data.Format == "" {
		data.Format = userdata.FormatCloudConfig
	}
	if networkData != nil {
		nd, o, err := NetworkData(ctx, c, ns, networkData.Name)
		if err != nil || nd == nil {
			return nil, o, err
		}
		data.NetworkData = nd
	}
	return data, outcome.Outcome{}, nil
}

// Render is the user data the VM boots from: the bootstrap data with the
// provider's additions; nil, with a failed outcome, for bootstrap data it
// cannot read.
func (d *Data) Render(add userdata.Additions) ([]byte, outcome.Outcome) {
	rendered, err := userdata.Render(d.Format, d.Raw, add)
	if err != nil {
		return nil, outcome.Fail(infrav1.BootstrapDataInvalidReason, fmt.Sprintf("bootstrap data Secret %s: %v", d.SecretName, err))
	}
	return rendered, outcome.Outcome{}
}

// Waiting is the outcome of waiting for owner's bootstrap provider.
func Waiting(owner string) outcome.Outcome {
	return outcome.Wait(infrav1.WaitingForBootstrapDataReason,
		"waiting for the bootstrap provider to write the "+owner+"'s bootstrap data Secret")
}

// NetworkData reads the network data Secret named name in namespace ns,
// under either key KubeVirt's users write, and marks it to move with its
// clusters. It returns nil, with a failed outcome, when the Secret or both
// keys are missing.
func NetworkData(ctx context.Context, c client.Client, ns, name string) ([]byte, outcome.Outcome, error) {
	nd := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nd)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, outcome.Outcome{}, fmt.Errorf("reading network data Secret %s/%s: %w", ns, name, err)
	}
	data := nd.Data["networkdata"]
	if data == nil {
		data = nd.Data["networkData"]
	}
	if err != nil || data == nil {
		return nil, outcome.Fail(infrav1.BootstrapDataInvalidReason, fmt.Sprintf(
			"network data Secret %s does not exist or has neither key \"networkdata\" nor \"networkData\"", name)), nil
	}
	// Referenced by name only: clusterctl move must take it along.
	if err := movable.KeepWithClusters(ctx, c, nd, ns); err != nil {
		return nil, outcome.Outcome{}, err
	}
	return data, outcome.Outcome{}, nil
}

// SecretData is the content of a user data Secret: the user data, and the
// network data when there is some.
func SecretData(userData, networkData []byte) map[string][]byte {
	data := map[string][]byte{UserDataKey: userData}
	if networkData != nil {
		data[NetworkDataKey] = networkData
	}
	return data
}

// NameConflict is the failure of a user data Secret named as the provider
// would name it but not made for owner (a kind: KubevirtMachine,
// KubevirtMachinePool): a VM would boot with it, so it is never reused.
func NameConflict(key types.NamespacedName, owner string) outcome.Outcome {
	return outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
		"Secret %s exists but was not created for this %s; rename or remove it", key, owner))
}

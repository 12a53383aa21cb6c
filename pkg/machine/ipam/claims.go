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

package ipam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// ClaimName names the claim of a machine's address on a network from the
// pool at index pool of its addressesFromPools: <machine>.<network>-<pool>.
// Network names hold no dots and indexes no dashes, so no two machines'
// claims can share a name.
func ClaimName(machine, network string, pool int) string {
	name := fmt.Sprintf("%s.%s-%d", machine, network, pool)
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:236] + "-" + hex.EncodeToString(sum[:8])
}

// addressRecheck is how soon a claim whose IPAddress the cache has not
// seen yet is looked at again.
const addressRecheck = 2 * time.Second

// Claims takes a machine's addresses from its pools through Cluster API's
// IPAM contract, in the machine's namespace on the management cluster.
type Claims struct {
	// Client reads claims and addresses through the cache, which the
	// machine controller's watch on claims keeps current.
	Client client.Client
}

// Ensure creates the machine's missing claims and returns its addresses
// once every claim is bound. Until then the outcome waits, naming the pool
// and the IPAM provider's reason.
func (c *Claims) Ensure(ctx context.Context, km *infrav1.KubevirtMachine, clusterName string) ([]Assigned, outcome.Outcome, error) {
	var out []Assigned
	for _, na := range km.Spec.NetworkAddresses {
		a := Assigned{Network: na.Network, Gateway: na.Gateway, Nameservers: na.Nameservers}
		for i, pool := range na.AddressesFromPools {
			prefix, gateway, wait, err := c.address(ctx, km, clusterName, na.Network, i, pool)
			if err != nil || wait.Reason != "" {
				return nil, wait, err
			}
			a.Addresses = append(a.Addresses, prefix)
			if a.PoolGateway == "" {
				a.PoolGateway = gateway
			}
		}
		out = append(out, a)
	}
	return out, outcome.Outcome{}, nil
}

// address returns the address of one claim, creating the claim first.
func (c *Claims) address(ctx context.Context, km *infrav1.KubevirtMachine, clusterName, network string, index int,
	pool infrav1.IPPoolReference) (netip.Prefix, string, outcome.Outcome, error) {
	name := ClaimName(km.Name, network, index)
	poolName := pool.Kind + "/" + pool.Name
	claim := &ipamv1.IPAddressClaim{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: km.Namespace, Name: name}, claim)
	if apierrors.IsNotFound(err) {
		claim = newClaim(km, clusterName, name, pool)
		if err := c.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			return netip.Prefix{}, "", outcome.Outcome{}, fmt.Errorf("creating IPAddressClaim %s: %w", name, err)
		}
		return netip.Prefix{}, "", outcome.Wait(infrav1.WaitingForIPAddressReason, fmt.Sprintf(
			"IPAddressClaim %s for network %s asks pool %s for an address", name, network, poolName)), nil
	}
	if err != nil {
		return netip.Prefix{}, "", outcome.Outcome{}, err
	}
	if !metav1.IsControlledBy(claim, km) {
		return netip.Prefix{}, "", outcome.Fail(infrav1.NameConflictReason, fmt.Sprintf(
			"IPAddressClaim %s exists and does not belong to this machine", name)), nil
	}
	if claim.Status.AddressRef.Name == "" {
		why := "the IPAM provider has not answered yet"
		for _, cond := range claim.Status.Conditions {
			if cond.Type == ipamv1.IPAddressClaimReadyCondition && cond.Status != metav1.ConditionTrue {
				why = cond.Reason + ": " + cond.Message
			}
		}
		usage, exhausted := c.poolUsage(ctx, km.Namespace, pool)
		if usage != "" {
			why += "; " + usage
		}
		o := outcome.Wait(infrav1.WaitingForIPAddressReason, fmt.Sprintf(
			"IPAddressClaim %s for network %s waits for pool %s: %s", name, network, poolName, why))
		if exhausted {
			// Only a person can end this wait (a larger pool, fewer
			// machines): a warning, shown at once. A claim just served
			// can read as waiting on an exhausted pool for a moment (the
			// pool is read live, the claim from the cache), so a young
			// claim waits a little first.
			if age := time.Since(claim.CreationTimestamp.Time); age < exhaustedAfter {
				o = o.After(exhaustedAfter - age)
			} else {
				o.State = outcome.Failed
			}
		}
		return netip.Prefix{}, "", o, nil
	}
	addr := &ipamv1.IPAddress{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: km.Namespace, Name: claim.Status.AddressRef.Name}, addr); err != nil {
		if apierrors.IsNotFound(err) {
			// Addresses are not watched: look again shortly.
			return netip.Prefix{}, "", outcome.Wait(infrav1.WaitingForIPAddressReason, fmt.Sprintf(
				"IPAddress %s of claim %s is not there yet", claim.Status.AddressRef.Name, name)).After(addressRecheck), nil
		}
		return netip.Prefix{}, "", outcome.Outcome{}, err
	}
	ip, err := netip.ParseAddr(addr.Spec.Address)
	if err != nil || addr.Spec.Prefix == nil {
		return netip.Prefix{}, "", outcome.Fail(infrav1.AddressNetworkInvalidReason, fmt.Sprintf(
			"IPAddress %s from pool %s has no usable address and prefix (%q/%v)", addr.Name, poolName, addr.Spec.Address, addr.Spec.Prefix)), nil
	}
	prefix, err := ip.Prefix(int(*addr.Spec.Prefix))
	if err != nil {
		return netip.Prefix{}, "", outcome.Fail(infrav1.AddressNetworkInvalidReason, fmt.Sprintf(
			"IPAddress %s from pool %s: %v", addr.Name, poolName, err)), nil
	}
	// The address itself, not the network, with the pool's prefix length.
	return netip.PrefixFrom(ip, prefix.Bits()), addr.Spec.Gateway, outcome.Outcome{}, nil
}

func newClaim(km *infrav1.KubevirtMachine, clusterName, name string, pool infrav1.IPPoolReference) *ipamv1.IPAddressClaim {
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	// A manager with --watch-filter sees only objects with its label.
	if v, ok := km.Labels[clusterv1.WatchLabel]; ok {
		labels[clusterv1.WatchLabel] = v
	}
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: km.Namespace,
			Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(km,
				infrav1.GroupVersion.WithKind("KubevirtMachine"))},
		},
		Spec: ipamv1.IPAddressClaimSpec{
			ClusterName: clusterName,
			PoolRef:     ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name},
		},
	}
	return claim
}

// Release deletes the machine's claims, which returns their addresses to
// the pools. Call it once the VM is gone. A claim the cache has not seen
// yet goes with the machine, through its owner reference.
func (c *Claims) Release(ctx context.Context, km *infrav1.KubevirtMachine) error {
	for _, na := range km.Spec.NetworkAddresses {
		for i := range na.AddressesFromPools {
			claim := &ipamv1.IPAddressClaim{}
			key := types.NamespacedName{Namespace: km.Namespace, Name: ClaimName(km.Name, na.Network, i)}
			if err := c.Client.Get(ctx, key, claim); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return err
			}
			if !metav1.IsControlledBy(claim, km) || !claim.DeletionTimestamp.IsZero() {
				continue
			}
			if err := c.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting IPAddressClaim %s: %w", key.Name, err)
			}
		}
	}
	return nil
}

// exhaustedAfter is how long a claim must have waited on an exhausted pool
// before the wait is a warning.
const exhaustedAfter = 5 * time.Second

// poolUsage describes how full a pool is, from the status the in-cluster
// IPAM provider keeps (status.ipAddresses: total, used, free), which says
// why a claim waits where the claim itself does not: that provider sets no
// condition on a claim it cannot serve. Empty when the pool cannot be read
// or keeps no such status; exhausted when no address is free.
func (c *Claims) poolUsage(ctx context.Context, namespace string, ref infrav1.IPPoolReference) (usage string, exhausted bool) {
	mappings, err := c.Client.RESTMapper().RESTMappings(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil || len(mappings) == 0 {
		return fmt.Sprintf("pool kind %s.%s is not served by the management cluster", ref.Kind, ref.APIGroup), false
	}
	// The newest version: an older one may lack the status fields, and
	// the mapper's order is not defined.
	mapping := slices.MaxFunc(mappings, func(a, b *meta.RESTMapping) int {
		return version.CompareKubeAwareVersionStrings(a.GroupVersionKind.Version, b.GroupVersionKind.Version)
	})
	pool := &unstructured.Unstructured{}
	pool.SetGroupVersionKind(mapping.GroupVersionKind)
	key := types.NamespacedName{Name: ref.Name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = namespace
	}
	if err := c.Client.Get(ctx, key, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("pool %s/%s does not exist", ref.Kind, ref.Name), false
		}
		return "", false
	}
	total, okTotal, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "total")
	free, okFree, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "free")
	switch {
	case !okTotal || !okFree:
		return "", false
	case free == 0:
		return fmt.Sprintf("the pool is exhausted: no free address, %d of %d in use", total, total), true
	default:
		return fmt.Sprintf("the pool has %d of %d addresses free", free, total), false
	}
}

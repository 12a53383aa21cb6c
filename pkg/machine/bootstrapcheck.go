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
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/ownedobject"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// SSHUser is the guest user the ssh bootstrap check logs in as, the one the
// community provider uses.
const SSHUser = "capk"

// Keys of the cluster's SSH key Secret, as the community provider names them.
const (
	sshPrivateKeyKey = "key"
	sshPublicKeyKey  = "pub"
)

// checkBootstrap runs the machine's bootstrap check on a running instance
// and records what BootstrapSucceeded says. The outcome is done once bootstrap is known
// to have succeeded; an SSH check that has not passed looks again after
// the recheck interval, since nothing announces it.
func (s *Service) checkBootstrap(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, state vmstatus.State, found *findings) outcome.Outcome {
	km := sc.KubevirtMachine
	result := func(o outcome.Outcome) outcome.Outcome {
		found.bootstrap = &o
		return o
	}
	if adoption.Adopted(vm) && state.Ready {
		// The community provider ran the guest's bootstrap and checked it;
		// its user data holds no host key this provider could check over
		// SSH. The tenant Node is what shows the machine joined.
		return result(outcome.Ready(infrav1.AdoptedReason, "checked by the community provider, which made the VM; not checked again"))
	}
	switch km.Spec.BootstrapCheckSpec.CheckStrategy {
	case infrav1.CheckStrategyGuestAgent:
		// The VMI turns Ready only when KubeVirt's probe, run by the guest
		// agent, finds the sentinel file.
		if !state.Ready {
			return result(outcome.Wait(infrav1.WaitingForBootstrapReason,
				"the guest agent has not found "+infrav1.BootstrapSentinelFile+" yet (the image needs qemu-guest-agent)"))
		}
		return result(outcome.Ready(infrav1.SucceededReason, "the guest agent found "+infrav1.BootstrapSentinelFile))
	case infrav1.CheckStrategySSH:
		if !state.Ready {
			return result(outcome.Wait(infrav1.WaitingForBootstrapReason, "waiting for the VM instance to be ready"))
		}
		if c := conditions.Get(km, infrav1.BootstrapSucceededCondition); c != nil && c.Status == metav1.ConditionTrue {
			// Bootstrap happens once; no need to log in again.
			return outcome.Ready(c.Reason, c.Message)
		}
		done, err := s.probeSSH(ctx, sc, vmi)
		switch {
		case err != nil:
			return result(outcome.Fail(infrav1.CheckFailedReason, err.Error()).After(s.recheck()))
		case !done:
			return result(outcome.Wait(infrav1.WaitingForBootstrapReason,
				infrav1.BootstrapSentinelFile+" does not exist yet in the guest").After(s.recheck()))
		}
		s.Recorder.Eventf(km, nil, corev1.EventTypeNormal, "BootstrapSucceeded", "CheckBootstrap", "found %s over SSH", infrav1.BootstrapSentinelFile)
		return result(outcome.Ready(infrav1.SucceededReason, "found "+infrav1.BootstrapSentinelFile+" over SSH with a verified host key"))
	}
	return result(outcome.Ready(infrav1.SucceededReason, "checkStrategy none: a running, ready VM counts as bootstrapped"))
}

// probeSSH logs into the guest at its node address with the cluster's key,
// accepting only the host key the provider injected.
func (s *Service) probeSSH(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	secret := &corev1.Secret{}
	found, err := get(ctx, sc.Access.Infra.APIReader, types.NamespacedName{Namespace: vmi.Namespace, Name: sc.UserData.Name}, secret)
	if err != nil {
		return false, err
	}
	hostKey := string(secret.Data[bootstrapdata.HostPublicKeyKey])
	if !found || hostKey == "" {
		return false, fmt.Errorf("user data Secret %s carries no SSH host key; the VM was not created for the ssh check", sc.UserData.Name)
	}
	keys, err := s.clusterSSHKeys(ctx, sc)
	if err != nil {
		return false, err
	}
	var ip string
	for _, a := range vmstatus.Addresses(vmi, vmstatus.NodeNetwork(vmi, tenantnet.NodeAddressNetwork(sc.KubevirtCluster, sc.KubevirtMachine))) {
		if a.Type == string(clusterv1.MachineInternalIP) {
			ip = a.Address
			break
		}
	}
	if ip == "" {
		return false, errors.New("the VM has no IP address to connect to")
	}
	prober := s.SSH
	if prober == nil {
		prober = &sshcheck.Prober{}
	}
	return prober.Probe(ctx, net.JoinHostPort(ip, "22"), SSHUser, keys.Private, hostKey)
}

// clusterSSHKeys returns the cluster's SSH client key pair, creating its
// Secret (owned by the Cluster) on first use. The Secret is the one named in
// the KubevirtCluster's sshKeys.dataSecretName, else <cluster>-ssh-keys.
func (s *Service) clusterSSHKeys(ctx context.Context, sc *Scope) (sshcheck.KeyPair, error) {
	name := infrav1.SSHKeys{}.SecretName(sc.Cluster.Name)
	if kc := sc.KubevirtCluster; kc != nil {
		name = kc.Spec.SSHKeys.SecretName(sc.Cluster.Name)
	}
	key := types.NamespacedName{Namespace: sc.Cluster.Namespace, Name: name}
	secret := &corev1.Secret{}
	found, err := get(ctx, s.Client, key, secret)
	if err != nil {
		return sshcheck.KeyPair{}, err
	}
	if found {
		if len(secret.Data[sshPrivateKeyKey]) == 0 || len(secret.Data[sshPublicKeyKey]) == 0 {
			return sshcheck.KeyPair{}, fmt.Errorf("SSH key Secret %s lacks key %q or %q", key, sshPrivateKeyKey, sshPublicKeyKey)
		}
		return sshcheck.KeyPair{Private: secret.Data[sshPrivateKeyKey], Public: string(secret.Data[sshPublicKeyKey])}, nil
	}
	pair, err := sshcheck.NewKeyPair()
	if err != nil {
		return sshcheck.KeyPair{}, err
	}
	secret = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: sc.Cluster.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sc.Cluster, clusterv1.GroupVersion.WithKind("Cluster"))}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{sshPrivateKeyKey: pair.Private, sshPublicKeyKey: []byte(pair.Public)},
	}
	if sc.KubevirtCluster != nil {
		// Deleted with the KubevirtCluster, before the Cluster is gone.
		ownedobject.Mark(secret, ownedobject.Key(sc.KubevirtCluster))
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another machine of the cluster won the race; use its keys.
			return s.clusterSSHKeys(ctx, sc)
		}
		return sshcheck.KeyPair{}, fmt.Errorf("creating SSH key Secret %s: %w", key, err)
	}
	return pair, nil
}

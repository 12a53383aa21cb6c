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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/ipam"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
)

type bootstrapData struct {
	*bootstrapdata.Data
	// userData is what the VM boots from: the bootstrap data rendered with
	// the provider's additions.
	userData      []byte
	hostPublicKey string
	// assigned are the machine's pool addresses, which guestNetwork adds
	// once the VM's interfaces are known; additions let it render the user
	// data again with them.
	assigned  []ipam.Assigned
	additions userdata.Additions
}

// userData gathers the bootstrap data of the machine. It returns nil, with
// an outcome saying why, while something is missing.
func (s *Service) userData(ctx context.Context, sc *Scope) (*bootstrapData, outcome.Outcome, error) {
	km := sc.KubevirtMachine
	read, wait, err := bootstrapdata.Read(ctx, s.Client, km.Namespace, sc.Machine.Spec.Bootstrap.DataSecretName,
		km.Spec.UserData.NetworkDataSecretRef, "Machine")
	if err != nil || read == nil {
		return nil, wait, err
	}
	data := &bootstrapData{Data: read}
	if km.Spec.BootstrapCheckSpec.CheckStrategy == infrav1.CheckStrategySSH {
		clientKeys, err := s.clusterSSHKeys(ctx, sc)
		if err != nil {
			return nil, outcome.Outcome{}, err
		}
		host, err := sshcheck.NewKeyPair()
		if err != nil {
			return nil, outcome.Outcome{}, err
		}
		data.additions = userdata.Additions{SSHHostKey: host.Private, SSHHostPublicKey: host.Public,
			SSHUser: SSHUser, SSHAuthorizedKeys: []string{clientKeys.Public}}
		data.hostPublicKey = host.Public
	}
	if data.assigned, wait, err = s.staticAddresses(ctx, sc); err != nil || wait.Reason != "" {
		return nil, wait, err
	}
	if data.userData, wait = data.Render(data.additions); data.userData == nil {
		return nil, wait, nil
	}
	return data, outcome.Outcome{}, nil
}

// staticAddresses claims the machine's pool addresses and returns them
// once every claim is bound; until then the outcome says what it waits for.
func (s *Service) staticAddresses(ctx context.Context, sc *Scope) ([]ipam.Assigned, outcome.Outcome, error) {
	km := sc.KubevirtMachine
	if len(km.Spec.NetworkAddresses) == 0 {
		return nil, outcome.Outcome{}, nil
	}
	return (&ipam.Claims{Client: s.Client}).Ensure(ctx, km, sc.Cluster.Name)
}

// keepUserData makes sure the VM of a machine still provisioning has its
// user data Secret: one whose create failed after the VM's is created now,
// and one written by an earlier version without an owner is given the VM.
func (s *Service) keepUserData(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) (outcome.Outcome, error) {
	secret, err := existingUserData(ctx, sc)
	switch {
	case err != nil:
		return outcome.Outcome{}, err
	case secret != nil:
		if !s.ours(sc.KubevirtMachine, secret) {
			return outcome.Ready("", ""), nil
		}
		return outcome.Ready("", ""), s.adoptUserData(ctx, sc, secret, vm)
	case provisioned(sc.KubevirtMachine) || sc.Machine == nil:
		return outcome.Ready("", ""), nil
	}
	// The Secret was created right after the VM, and the cache may not
	// have seen it yet when the VM's event brings the machine here.
	found, err := get(ctx, sc.Access.Infra.APIReader, sc.UserData, &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}})
	if err != nil || found {
		return outcome.Ready("", ""), err
	}
	data, wait, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return wait, err
	}
	if o := guestNetwork(sc, data, vm, false); o.Reason != "" {
		return o, nil
	}
	return s.ensureUserDataSecret(ctx, sc, data, vm)
}

// reconcileUserData keeps the VM's user data Secret (keepUserData); a
// pool's VMs share their pool's.
func (s *Service) reconcileUserData(ctx context.Context, sc *Scope, r *reconcileRun) (outcome.Outcome, bool, error) {
	// An adopted VM boots from the community provider's Secret, which it
	// owns since the adoption (adopt.go).
	if sc.PoolVMUID() != "" || adoption.Adopted(r.vm) {
		return outcome.Outcome{}, false, nil
	}
	if o, err := s.keepUserData(ctx, sc, r.vm); err != nil || !o.IsDone() {
		r.found.vm = &o
		return o, true, err
	}
	return outcome.Outcome{}, false, nil
}

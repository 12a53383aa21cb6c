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

package machinepool

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	poolv1 "kubevirt.io/api/pool/v1beta1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/bootstrapdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmbuilder"
)

type bootstrapData struct {
	*bootstrapdata.Data
	// userData is what every VM of the pool boots from.
	userData []byte
}

// userData reads the bootstrap data the MachinePool's bootstrap provider
// wrote for every instance, and the pool's network data. It returns nil,
// with an outcome saying why, while something is missing. What it read is
// remembered until either Secret changes.
func (s *Service) userData(ctx context.Context, sc *Scope) (*bootstrapData, outcome.Outcome, error) {
	p := sc.Pool
	name := sc.MachinePool.Spec.Template.Spec.Bootstrap.DataSecretName
	ref := p.Spec.Template.Spec.UserData.NetworkDataSecretRef
	if name == nil {
		return nil, bootstrapdata.Waiting("MachinePool"), nil
	}
	names := []string{*name}
	if ref != nil {
		names = append(names, ref.Name)
	}
	versions, err := versionsOf(ctx, s.Client, p.Namespace, names...)
	if err != nil {
		return nil, outcome.Outcome{}, err
	}
	key := client.ObjectKeyFromObject(p)
	if r := s.memo.get(key); r.data != nil && r.versions == versions {
		return r.data, outcome.Outcome{}, nil
	}
	read, wait, err := bootstrapdata.Read(ctx, s.Client, p.Namespace, name, ref, "MachinePool")
	if err != nil || read == nil {
		return nil, wait, err
	}
	data := &bootstrapData{Data: read}
	if data.userData, wait = data.Render(userdata.Additions{}); data.userData == nil {
		return nil, wait, nil
	}
	s.memo.set(key, remembered{versions: versions, data: data})
	return data, outcome.Outcome{}, nil
}

// ensureUserDataSecret keeps the Secret every VM of the pool boots from
// beside the pool, owned by it so that it goes with the pool. Unlike a
// machine's, a pool's bootstrap data can change (a new bootstrap token, a
// new Kubernetes version): the Secret follows, for the VMs created next.
func (s *Service) ensureUserDataSecret(ctx context.Context, sc *Scope, data *bootstrapData, pool *poolv1.VirtualMachinePool) (o outcome.Outcome, rerr error) {
	p := sc.Pool
	key := client.ObjectKeyFromObject(p)
	infra := sc.Access.Infra
	if r := s.memo.get(key); pool.UID != "" && r.data == data && r.writtenFor == pool.UID && ownerKept(ctx, infra, pool) {
		return outcome.Ready("", ""), nil
	}
	defer func() {
		// Remembered only while the memo still holds this data.
		if r := s.memo.get(key); rerr == nil && o.IsDone() && pool.UID != "" && r.data == data {
			r.writtenFor = pool.UID
			s.memo.set(key, r)
		}
	}()
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			// No cluster-name label, as a machine's user data Secret
			// (pkg/machine/create.go): the owner annotation identifies it.
			Name: userDataKey(client.ObjectKeyFromObject(pool)).Name, Namespace: pool.Namespace,
			Annotations: map[string]string{infrav1.PoolOwnerAnnotation: vmbuilder.OwnerOf(p.Namespace, p.Name)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: bootstrapdata.SecretData(data.userData, data.NetworkData),
	}
	if pool.UID != "" {
		want.OwnerReferences = []metav1.OwnerReference{poolOwnerReference(pool)}
	}
	existing := &corev1.Secret{}
	err := infra.APIReader.Get(ctx, client.ObjectKeyFromObject(want), existing)
	if apierrors.IsNotFound(err) {
		if err := infra.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return outcome.Outcome{}, fmt.Errorf("creating user data Secret %s: %w", client.ObjectKeyFromObject(want), err)
		}
		return outcome.Ready("", ""), nil
	}
	if err != nil {
		return outcome.Outcome{}, err
	}
	if existing.Annotations[infrav1.PoolOwnerAnnotation] != want.Annotations[infrav1.PoolOwnerAnnotation] {
		return bootstrapdata.NameConflict(client.ObjectKeyFromObject(want), "KubevirtMachinePool"), nil
	}
	if maps.EqualFunc(existing.Data, want.Data, bytes.Equal) && (pool.UID == "" || util.HasExactOwnerRef(existing.OwnerReferences, want.OwnerReferences[0])) {
		return outcome.Ready("", ""), nil
	}
	before := existing.DeepCopy()
	existing.Data = want.Data
	if pool.UID != "" {
		existing.OwnerReferences = util.EnsureOwnerRef(existing.OwnerReferences, want.OwnerReferences[0])
	}
	if err := infra.Client.Patch(ctx, existing, client.MergeFrom(before)); err != nil {
		return outcome.Outcome{}, fmt.Errorf("updating user data Secret %s: %w", client.ObjectKeyFromObject(want), err)
	}
	return outcome.Ready("", ""), nil
}

// userDataKey is the name of the user data Secret beside a pool.
func userDataKey(pool types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name + infrav1.UserDataSecretSuffix}
}

// poolOwnerReference makes the VirtualMachinePool own its user data. No
// blockOwnerDeletion: it would need the finalizers subresource of pools,
// which clusters enforcing owner references check.
func poolOwnerReference(pool *poolv1.VirtualMachinePool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: poolv1.SchemeGroupVersion.String(), Kind: "VirtualMachinePool",
		Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: ptr.To(false)}
}

// ownerKept tells whether the pool's user data Secret, written before,
// still carries the pool's owner reference as written: a restore from a
// backup, or anyone, may have removed it or moved it to another API
// version, and the garbage collector resolves owners by version. On the
// management cluster the manager's cache of Secret metadata answers for
// free (its watch brings the change here); an external infra cluster's
// Secret is not read again for it, as the memo is there to spare that read.
func ownerKept(ctx context.Context, infra *infracluster.Infra, pool *poolv1.VirtualMachinePool) bool {
	if infra.External {
		return true
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := infra.Cache.Get(ctx, userDataKey(client.ObjectKeyFromObject(pool)), meta); err != nil {
		return false
	}
	return util.HasExactOwnerRef(meta.OwnerReferences, poolOwnerReference(pool))
}

// userDataConflict reports a Secret of the pool's user data name that is
// not the pool's.
func (s *Service) userDataConflict(ctx context.Context, sc *Scope, pool types.NamespacedName) (outcome.Outcome, error) {
	existing := &corev1.Secret{}
	key := userDataKey(pool)
	err := sc.Access.Infra.APIReader.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		return outcome.Ready("", ""), nil
	}
	if err != nil {
		return outcome.Outcome{}, err
	}
	if existing.Annotations[infrav1.PoolOwnerAnnotation] != vmbuilder.OwnerOf(sc.Pool.Namespace, sc.Pool.Name) {
		return bootstrapdata.NameConflict(key, "KubevirtMachinePool"), nil
	}
	return outcome.Ready("", ""), nil
}

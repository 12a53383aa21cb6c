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

package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
)

// Indexes that map events to the few machines they concern without going
// through every machine: a Secret event (every machine's bootstrap data and
// user data is one) or a tenant Node event listing all machines made the
// cost of provisioning grow with the square of the machines.
const (
	// bootstrapSecretIndex indexes Machines by their bootstrap data Secret.
	bootstrapSecretIndex = "capkv.spec.bootstrap.dataSecretName" //nolint:gosec // an index name, not a credential
	// secretRefIndex indexes KubevirtMachines and KubevirtClusters by the
	// Secrets they name, "<namespace>/<name>".
	secretRefIndex = "capkv.secretRefs" //nolint:gosec // an index name, not a credential
	// nodeNameIndex indexes KubevirtMachines by "<cluster>/<tenant Node>".
	nodeNameIndex = "capkv.nodeName"
)

// IndexMachines registers the indexes the KubevirtMachine controller's
// watches use; call it once, before setting up the controllers.
func IndexMachines(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &clusterv1.Machine{}, bootstrapSecretIndex, func(o client.Object) []string {
		m := o.(*clusterv1.Machine)
		if b := m.Spec.Bootstrap.DataSecretName; b != nil && m.Spec.InfrastructureRef.Kind == "KubevirtMachine" {
			return []string{*b}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &infrav1.KubevirtMachine{}, secretRefIndex, func(o client.Object) []string {
		km := o.(*infrav1.KubevirtMachine)
		var refs []string
		if ref := km.Spec.InfraClusterSecretRef; ref != nil {
			refs = append(refs, secretKey(ref, km.Namespace))
		}
		if nd := km.Spec.UserData.NetworkDataSecretRef; nd != nil {
			refs = append(refs, km.Namespace+"/"+nd.Name)
		}
		return refs
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &infrav1.KubevirtCluster{}, secretRefIndex, func(o client.Object) []string {
		kc := o.(*infrav1.KubevirtCluster)
		if ref := kc.Spec.InfraClusterSecretRef; ref != nil {
			return []string{secretKey(ref, kc.Namespace)}
		}
		return nil
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &infrav1.KubevirtMachine{}, nodeNameIndex, func(o client.Object) []string {
		km := o.(*infrav1.KubevirtMachine)
		return []string{km.Labels[clusterv1.ClusterNameLabel] + "/" + machine.NodeName(km)}
	})
}

// secretKey is the index value of a Secret reference, whose namespace
// defaults to the referring object's.
func secretKey(ref *corev1.ObjectReference, ns string) string {
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	return ns + "/" + ref.Name
}

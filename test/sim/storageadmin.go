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

package sim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// setupStorageAdmin plays the infra cluster's admin for CDI: CDI knows the
// access and volume modes of the provisioners it lists, not of the
// simulated CSI driver, so it leaves a StorageProfile of that driver empty
// and refuses DataVolumes that do not give both (ErrClaimNotValid). An
// admin completes such a profile once, in its spec; so does this, with
// ReadWriteOnce and Filesystem, what the simulated driver offers.
func (s *Simulator) setupStorageAdmin(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-storage-admin").
		For(&cdiv1.StorageProfile{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			sp := &cdiv1.StorageProfile{}
			if err := s.client.Get(ctx, req.NamespacedName, sp); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if len(sp.Spec.ClaimPropertySets) > 0 || len(sp.Status.ClaimPropertySets) > 0 {
				return reconcile.Result{}, nil
			}
			patch := client.MergeFrom(sp.DeepCopy())
			fs := corev1.PersistentVolumeFilesystem
			sp.Spec.ClaimPropertySets = []cdiv1.ClaimPropertySet{{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs}}
			return reconcile.Result{}, s.client.Patch(ctx, sp, patch)
		}))
}

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// restartIfRequested acts once on the restart-requested-at annotation: it
// deletes the running instance so that KubeVirt starts the VM again, and
// records the request as handled. It reports whether it deleted one.
func (s *Service) restartIfRequested(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	km := sc.KubevirtMachine
	req := km.Annotations[infrav1.RestartRequestedAnnotation]
	if req == "" || req == km.Status.LastRestartRequest {
		return false, nil
	}
	km.Status.LastRestartRequest = req
	if !vmstatus.Restartable(vm) {
		s.Recorder.Eventf(km, vm, corev1.EventTypeWarning, "RestartRefused", "RestartVirtualMachine",
			"restart requested at %s refused: VirtualMachine %s/%s would not start again (runStrategy %s; only Always restarts)",
			req, vm.Namespace, vm.Name, vmstatus.RunStrategy(vm))
		return false, nil
	}
	if vmi == nil || vmstatus.Finished(vmi) || !vmi.DeletionTimestamp.IsZero() {
		// Already on its way to a new instance.
		return false, nil
	}
	if err := s.deleteInstance(ctx, sc, vmi); err != nil {
		return false, err
	}
	s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, "VirtualMachineRestarted", "RestartVirtualMachine",
		"restart requested at %s: deleted VM instance %s/%s (on %s); KubeVirt starts a new one", req, vmi.Namespace, vmi.Name, vmi.Status.NodeName)
	return true, nil
}

// deleteInstance deletes exactly this instance, not a newer one of the
// same name.
func (s *Service) deleteInstance(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance) error {
	uid := vmi.UID
	err := sc.Access.Infra.Client.Delete(ctx, vmi, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting VM instance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return nil
}

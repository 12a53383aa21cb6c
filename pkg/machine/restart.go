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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deleteInstance deletes exactly this instance, not a newer one of the
// same name.
func (s *Service) deleteInstance(ctx context.Context, sc *Scope, vmi *kubevirtv1.VirtualMachineInstance) error {
	uid := vmi.UID
	err := sc.Infra().Client.Delete(ctx, vmi, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting VM instance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return nil
}

func runStrategyOf(vm *kubevirtv1.VirtualMachine) string {
	if vm.Spec.RunStrategy != nil {
		return string(*vm.Spec.RunStrategy)
	}
	if vm.Spec.Running != nil && *vm.Spec.Running {
		return "Always (running: true)"
	}
	return "Halted"
}

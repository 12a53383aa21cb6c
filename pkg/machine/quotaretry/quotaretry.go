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

// Package quotaretry gets a machine past what the ResourceQuotas and
// LimitRanges of its infra namespace refused, once they change (KubeVirt and
// CDI retry a refused launcher pod or disk claim only on their own backoff,
// docs/operations.md#quota).
package quotaretry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// readTimeout bounds the reads of quotas and limit ranges: an external
// infra kubeconfig may not be allowed to list them.
const readTimeout = 10 * time.Second

// RetryRefused asks KubeVirt or CDI to try again, at once, to create what
// a ResourceQuota or LimitRange of the infra namespace refused, whenever
// those changed since it last asked: virt-controller and CDI retry a
// refused pod or claim only on their own backoff, which grows to about 17
// minutes, and neither watches quotas. The provider watches them
// (controllers/kubevirtmachine_watches.go) and touches the refused object,
// whose update event requeues it in its controller at once. A namespace
// whose guardrails stay the same costs no write.
func RetryRefused(ctx context.Context, infra *infracluster.Infra, vmi *kubevirtv1.VirtualMachineInstance, dvs []*cdiv1.DataVolume) error {
	var refused []client.Object
	if _, ok := vmstatus.LauncherRefusal(vmi); ok {
		refused = append(refused, vmi)
	}
	for _, dv := range dvs {
		if _, ok := vmstatus.DiskRefusal(dv); ok {
			refused = append(refused, dv)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	// Read directly, with a deadline: the kubeconfig of an external infra
	// cluster may not allow listing quotas, and a cached list would then
	// wait for an informer that never syncs.
	readCtx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	fingerprint, err := guardrails(readCtx, infra.APIReader, refused[0].GetNamespace())
	if err != nil {
		return err
	}
	for _, obj := range refused {
		if obj.GetAnnotations()[infrav1.GuardrailsAnnotation] == fingerprint {
			continue
		}
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[infrav1.GuardrailsAnnotation] = fingerprint
		obj.SetAnnotations(annotations)
		if err := infra.Client.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("asking for a retry of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// guardrails is a fingerprint of the namespace's ResourceQuotas and
// LimitRanges: their names and resource versions, which change with their
// spec and with a quota's usage.
func guardrails(ctx context.Context, c client.Reader, namespace string) (string, error) {
	quotas := &corev1.ResourceQuotaList{}
	if err := c.List(ctx, quotas, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("listing the ResourceQuotas of %s: %w", namespace, err)
	}
	limits := &corev1.LimitRangeList{}
	if err := c.List(ctx, limits, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("listing the LimitRanges of %s: %w", namespace, err)
	}
	var parts []string
	for _, q := range quotas.Items {
		parts = append(parts, "q/"+q.Name+"@"+q.ResourceVersion)
	}
	for _, l := range limits.Items {
		parts = append(parts, "l/"+l.Name+"@"+l.ResourceVersion)
	}
	slices.Sort(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, ",")))
	return hex.EncodeToString(sum[:8]), nil
}

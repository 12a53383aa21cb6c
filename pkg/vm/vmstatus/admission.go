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

package vmstatus

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Refusal is the infra API server's refusal, at admission, of an object
// KubeVirt or CDI creates for a VM: its launcher pod or a disk's claim.
type Refusal struct {
	// Reason is QuotaExceeded or LimitRangeViolated.
	Reason string
	// Quota names the ResourceQuota that refused, when one did.
	Quota string
	// Message is the API server's own, from the quota's or limit's
	// words on, without the refused object's generated name.
	Message string
}

// refusal reads an API server refusal out of a KubeVirt or CDI message.
// The phrases are those of the API server's admission plugins: the
// ResourceQuota plugin's "exceeded quota: <name>, requested: …, used: …,
// limited: …" and "status unknown for quota: <name>" (quota not yet
// computed), and the LimitRanger's "maximum|minimum <resource> usage per
// <Container|Pod|PersistentVolumeClaim> is …" and "… limit to request
// ratio per …" (k8s.io/apiserver/pkg/admission/plugin/resourcequota,
// plugin/pkg/admission/limitranger).
func refusal(msg string) (Refusal, bool) {
	for _, marker := range []string{"exceeded quota: ", "status unknown for quota: "} {
		if _, rest, found := strings.Cut(msg, marker); found {
			name, _, _ := strings.Cut(rest, ",")
			return Refusal{Reason: infrav1.QuotaExceededReason, Quota: strings.TrimSpace(name), Message: marker + rest}, true
		}
	}
	if strings.Contains(msg, " usage per ") || strings.Contains(msg, " limit to request ratio per ") {
		return Refusal{Reason: infrav1.LimitRangeViolatedReason, Message: afterForbidden(msg)}, true
	}
	return Refusal{}, false
}

// afterForbidden is the API server's reason without what precedes it
// (`pods "virt-launcher-m-0-x7k2p" is forbidden: `): the launcher pod's
// generated name changes with every retry, and a message that changes is
// a status write each time.
func afterForbidden(msg string) string {
	if _, rest, found := strings.Cut(msg, " is forbidden: "); found {
		return rest
	}
	return msg
}

// LauncherRefusal is the refusal of the instance's launcher pod, if
// virt-controller reported one: it keeps the instance Pending with
// Synchronized False, reason FailedCreate, and the API server's message
// (docs/kubevirt-behaviour.md#launcher-pod-refused).
func LauncherRefusal(vmi *kubevirtv1.VirtualMachineInstance) (Refusal, bool) {
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Pending && vmi.Status.Phase != "" {
		return Refusal{}, false
	}
	c := Condition(vmi, "Synchronized")
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "FailedCreate" {
		return Refusal{}, false
	}
	return refusal(c.Message)
}

// DiskRefusal is the refusal of a DataVolume's claim, if CDI reported one:
// CDI keeps the DataVolume Pending with Bound False, reason
// ErrExceededQuota for a quota, and the API server's message.
func DiskRefusal(dv *cdiv1.DataVolume) (Refusal, bool) {
	for _, c := range dv.Status.Conditions {
		if c.Status == corev1.ConditionTrue || c.Message == "" {
			continue
		}
		if r, ok := refusal(c.Message); ok {
			return r, true
		}
	}
	return Refusal{}, false
}

// refusalState is the verdict for a refused object; what is the object the
// API server refused, for the message.
func refusalState(r Refusal, what string) State {
	if r.Reason == infrav1.QuotaExceededReason {
		return State{Reason: r.Reason, Warning: true, Message: what + " refused by ResourceQuota " + r.Quota +
			" of the infra namespace; retried when a quota there changes: " + r.Message}
	}
	return State{Reason: r.Reason, Warning: true, Message: what +
		" refused by a LimitRange of the infra namespace; retried when a limit range there changes: " + r.Message}
}

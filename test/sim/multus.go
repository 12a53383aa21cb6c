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
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

const (
	multusNetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
	multusDefaultAnnotation  = "v1.multus-cni.io/default-network"
)

var nadGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

type multusSelection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// multusNetworks lists the VMI's Multus networks as KubeVirt puts them on the
// launcher pod, for Multus to attach.
func multusNetworks(vmi *kubevirtv1.VirtualMachineInstance) string {
	var sel []multusSelection
	for _, n := range vmi.Spec.Networks {
		if n.Multus == nil || n.Multus.Default {
			continue
		}
		ns, name := vmi.Namespace, n.Multus.NetworkName
		if i := strings.IndexByte(name, '/'); i >= 0 {
			ns, name = name[:i], name[i+1:]
		}
		sel = append(sel, multusSelection{Name: name, Namespace: ns})
	}
	if len(sel) == 0 {
		return ""
	}
	data, _ := json.Marshal(sel)
	return string(data)
}

// multusDefault is the default network replacing the pod network, if any.
func multusDefault(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil && n.Multus.Default {
			return qualified(vmi.Namespace, n.Multus.NetworkName)
		}
	}
	return ""
}

// missingNetwork names the first NetworkAttachmentDefinition the pod needs
// that does not exist.
func (s *Simulator) missingNetwork(ctx context.Context, pod *corev1.Pod) (string, error) {
	var sel []multusSelection
	if raw := pod.Annotations[multusNetworksAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &sel); err != nil {
			return "", err
		}
	}
	if def := pod.Annotations[multusDefaultAnnotation]; def != "" {
		ns, name, _ := strings.Cut(def, "/")
		sel = append(sel, multusSelection{Namespace: ns, Name: name})
	}
	for _, n := range sel {
		nad := &unstructured.Unstructured{}
		nad.SetGroupVersionKind(nadGVK)
		err := s.client.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.Name}, nad)
		if apierrors.IsNotFound(err) || isNoMatch(err) {
			return n.Namespace + "/" + n.Name, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", nil
}

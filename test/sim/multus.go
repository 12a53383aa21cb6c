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
	"cmp"
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
		ns, name, found := strings.Cut(def, "/")
		if !found {
			ns, name = "", def
		}
		sel = append(sel, multusSelection{Namespace: ns, Name: name})
	}
	for _, n := range sel {
		// Multus looks a network up in the pod's namespace unless told
		// otherwise.
		n.Namespace = cmp.Or(n.Namespace, pod.Namespace)
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

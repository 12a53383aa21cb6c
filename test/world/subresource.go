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

package world

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// virtSubresources is the API group virt-api serves VM and VM instance
// actions under (addvolume, removevolume, ...), apart from the objects'.
var virtSubresources = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// NewVirtSubresourceClient is a REST client for virt-api's subresources,
// acting as cfg does.
func NewVirtSubresourceClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &virtSubresources
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(c)
}

// PutVirtSubresource PUTs body, as JSON, to a subresource of a namespaced
// KubeVirt object: resource "virtualmachines", subresource "addvolume",
// as virtctl and KubeVirt's client do.
func PutVirtSubresource(ctx context.Context, c *rest.RESTClient, namespace, resource, name, subresource string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Put().Namespace(namespace).Resource(resource).Name(name).SubResource(subresource).
		SetHeader("Content-Type", "application/json").Body(raw).Do(ctx).Error()
}

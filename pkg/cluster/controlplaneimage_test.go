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

package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestKubevirtMachineTemplateOf(t *testing.T) {
	controlPlane := func(machineTemplate map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"machineTemplate": machineTemplate}}}
	}
	tests := []struct {
		name   string
		cp     *unstructured.Unstructured
		want   string
		wantOK bool
	}{
		{"v1beta2 contract", controlPlane(map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate", "name": "cp"}}}), "cp", true},
		{"v1beta1 contract", controlPlane(map[string]any{"infrastructureRef": map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "KubevirtMachineTemplate", "name": "old"}}), "old", true},
		{"another provider's template", controlPlane(map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "cp"}}}), "", false},
		{"same kind in another group", controlPlane(map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": "example.com", "kind": "KubevirtMachineTemplate", "name": "cp"}}}), "", false},
		{"no name", controlPlane(map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate"}}}), "", false},
		{"a control plane without machines", &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}, "", false},
		{"a malformed reference", controlPlane(map[string]any{"spec": map[string]any{"infrastructureRef": "cp"}}), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := KubevirtMachineTemplateOf(tt.cp)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("KubevirtMachineTemplateOf() = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

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

package tenantnet

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func nadTemplate(config string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": config}}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace("templates")
	u.SetName("vlan")
	u.SetAnnotations(annotations)
	return u
}

func TestRange(t *testing.T) {
	for raw, want := range map[string][2]int32{"100-199": {100, 199}, "7 - 7": {7, 7}} {
		lo, hi, err := Range(nadTemplate("{}", map[string]string{infrav1.VLANRangeAnnotation: raw}))
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("%q: %d-%d %v", raw, lo, hi, err)
		}
	}
	for _, raw := range []string{"100", "0-10", "10-5000", "20-10", "a-b"} {
		if _, _, err := Range(nadTemplate("{}", map[string]string{infrav1.VLANRangeAnnotation: raw})); !IsTemplateError(err) {
			t.Errorf("%q accepted: %v", raw, err)
		}
	}
	if _, _, err := Range(nadTemplate("{}", nil)); !IsTemplateError(err) {
		t.Errorf("missing range: %v", err)
	}
}

func TestPick(t *testing.T) {
	used := map[int32]string{100: "a/x", 101: "b/y"}
	tests := []struct {
		name      string
		requested *int32
		current   int32
		want      int32
		wantErr   bool
	}{
		{"lowest free", nil, 0, 102, false},
		{"keeps its current VLAN", nil, 105, 105, false},
		{"current taken meanwhile: refused, never moved", nil, 101, 0, true},
		{"requested free", ptr.To[int32](150), 0, 150, false},
		{"requested taken", ptr.To[int32](100), 0, 0, true},
	}
	for _, tt := range tests {
		got, err := Pick(tt.requested, tt.current, used, 100, 110)
		if got != tt.want || (err != nil) != tt.wantErr || (err != nil && !IsVLANError(err)) {
			t.Errorf("%s: got %d %v", tt.name, got, err)
		}
	}
	if _, err := Pick(nil, 0, used, 100, 101); !IsVLANError(err) {
		t.Errorf("exhausted range: %v", err)
	}
}

func TestRender(t *testing.T) {
	kc := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "blue", Namespace: "tenants"}}
	kc.Spec.Network.PerCluster = &infrav1.PerClusterNetwork{TemplateRef: infrav1.NamespacedRef{Namespace: "templates", Name: "vlan"}}
	tmpl := nadTemplate(`{"type":"bridge","vlan":{{ .VLANID }},"name":"{{ .ClusterName }}"}`,
		map[string]string{infrav1.VLANRangeAnnotation: "1-9", "k8s.v1.cni.cncf.io/resourceName": "bridge/br1"})
	nad, err := Render(tmpl, kc, "blue-cluster", "infra", 7)
	if err != nil {
		t.Fatal(err)
	}
	config, _, _ := unstructured.NestedString(nad.Object, "spec", "config")
	if config != `{"type":"bridge","vlan":7,"name":"blue-cluster"}` || nad.GetName() != "blue-tenant" || nad.GetNamespace() != "infra" {
		t.Errorf("rendered %s/%s %s", nad.GetNamespace(), nad.GetName(), config)
	}
	a := nad.GetAnnotations()
	if a[infrav1.VLANAnnotation] != "7" || a["k8s.v1.cni.cncf.io/resourceName"] != "bridge/br1" || a[infrav1.VLANRangeAnnotation] != "" {
		t.Errorf("annotations %v", a)
	}
	if VLANOf(nad) != 7 || nad.GetLabels()[infrav1.NetworkTemplateLabel] != TemplateHash(kc.Spec.Network.PerCluster.TemplateRef) {
		t.Errorf("labels %v", nad.GetLabels())
	}
	for _, bad := range []string{`{"vlan":{{ .VLAN }}}`, `{"vlan":{{ .VLANID }`, `vlan {{ .VLANID }}`, ""} {
		if _, err := Render(nadTemplate(bad, nil), kc, "c", "infra", 7); !IsTemplateError(err) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

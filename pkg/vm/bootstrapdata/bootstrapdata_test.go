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

package bootstrapdata

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/userdata"
)

func TestSecretData(t *testing.T) {
	if got := SecretData([]byte("u"), nil); len(got) != 1 || string(got[UserDataKey]) != "u" {
		t.Errorf("without network data: %v", got)
	}
	got := SecretData([]byte("u"), []byte("n"))
	if len(got) != 2 || string(got[UserDataKey]) != "u" || string(got[NetworkDataKey]) != "n" {
		t.Errorf("with network data: %v", got)
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    Data
		wantErr bool
	}{
		{name: "cloud-config", data: Data{Format: userdata.FormatCloudConfig, Raw: []byte("#cloud-config\nruncmd: []\n"), SecretName: "b"}},
		{name: "unknown format", data: Data{Format: "shell", Raw: []byte("echo hi"), SecretName: "b"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered, o := tc.data.Render(userdata.Additions{})
			if tc.wantErr {
				if o.State != outcome.Failed || o.Reason != infrav1.BootstrapDataInvalidReason || !strings.Contains(o.Message, "bootstrap data Secret b") || rendered != nil {
					t.Errorf("got %q, %+v; want a BootstrapDataInvalid failure naming the Secret", rendered, o)
				}
				return
			}
			if o.Reason != "" || len(rendered) == 0 {
				t.Errorf("got %q, %+v; want rendered user data", rendered, o)
			}
		})
	}
}

func TestNameConflictAndWaiting(t *testing.T) {
	o := NameConflict(types.NamespacedName{Namespace: "ns", Name: "vm-userdata"}, "KubevirtMachinePool")
	if o.State != outcome.Failed || o.Reason != infrav1.NameConflictReason ||
		o.Message != "Secret ns/vm-userdata exists but was not created for this KubevirtMachinePool; rename or remove it" {
		t.Errorf("NameConflict: %+v", o)
	}
	if w := Waiting("Machine"); w.State != outcome.Waiting || !strings.Contains(w.Message, "the Machine's bootstrap data Secret") {
		t.Errorf("Waiting: %+v", w)
	}
}

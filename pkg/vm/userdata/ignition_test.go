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

package userdata

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	ign3 "github.com/coreos/ignition/v2/config"
	ign23 "github.com/flatcar/ignition/config/v2_3"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	cabpkignition "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"
)

// decodeDataURL undoes dataURL, failing on anything else.
func decodeDataURL(t *testing.T, source string) []byte {
	t.Helper()
	const prefix = "data:;base64,"
	if !strings.HasPrefix(source, prefix) {
		t.Fatalf("source %.30q... is not a base64 data URL", source)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(source, prefix))
	if err != nil {
		t.Fatalf("data URL: %v", err)
	}
	return b
}

// wantFile is a file the parent config must write.
type wantFile struct {
	mode     int
	contents []byte
}

// checkFileCount checks that the config has as many files as want.
func checkFileCount(t *testing.T, n int, want map[string]wantFile) {
	t.Helper()
	if n != len(want) {
		t.Errorf("got %d files, want %d", n, len(want))
	}
}

// checkFile checks a file of the rendered config against want: a path it
// names, with its mode and contents.
func checkFile(t *testing.T, want map[string]wantFile, path string, mode *int, contents []byte) {
	t.Helper()
	w, ok := want[path]
	if !ok {
		t.Errorf("unexpected file %s", path)
		return
	}
	if mode == nil || *mode != w.mode {
		t.Errorf("%s: mode %v, want %o", path, mode, w.mode)
	}
	if !bytes.Equal(contents, w.contents) {
		t.Errorf("%s: contents %q, want %q", path, contents, w.contents)
	}
}

func wantFiles(add Additions) map[string]wantFile {
	return map[string]wantFile{
		hostKeyPath:            {0o600, add.SSHHostKey},
		hostPubKeyPath:         {0o644, []byte(add.SSHHostPublicKey + "\n")},
		"/etc/sudoers.d/capkv": {0o440, []byte("capkv ALL=(ALL) NOPASSWD:ALL\n")},
	}
}

// cabpkIgnition is what CABPK's kubeadm bootstrap provider emits for a
// worker node with Ignition enabled.
func cabpkIgnition(t *testing.T) []byte {
	t.Helper()
	out, _, err := cabpkignition.NewNode(&cabpkignition.NodeInput{
		NodeInput: &cloudinit.NodeInput{JoinConfiguration: "kind: JoinConfiguration\n"},
		Ignition:  &bootstrapv1.IgnitionSpec{},
	})
	if err != nil {
		t.Fatalf("CABPK Ignition: %v", err)
	}
	return out
}

func TestRenderIgnitionV3(t *testing.T) {
	add := fullAdditions(t)
	for _, version := range []string{"3.0.0", "3.4.0", "3.5.0", "3.6.0-experimental"} {
		t.Run(version, func(t *testing.T) {
			data := []byte(`{"ignition":{"version":"` + version + `"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,secret"}}]}}`)
			out, err := Render(FormatIgnition, data, add)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			cfg, rpt, err := ign3.Parse(out)
			if err != nil {
				t.Fatalf("Ignition rejects the parent config: %v\n%s", err, rpt)
			}
			if len(rpt.Entries) != 0 {
				t.Errorf("Ignition reports on the parent config:\n%s", rpt)
			}
			var head struct {
				Ignition struct{ Version string } `json:"ignition"`
			}
			if err := json.Unmarshal(out, &head); err != nil || head.Ignition.Version != version {
				t.Errorf("parent version = %q (%v), want %q", head.Ignition.Version, err, version)
			}
			merge := cfg.Ignition.Config.Merge
			if len(merge) != 1 || merge[0].Source == nil {
				t.Fatalf("want one merge source, got %+v", merge)
			}
			if got := decodeDataURL(t, *merge[0].Source); !bytes.Equal(got, data) {
				t.Errorf("merged config changed:\n got %q\nwant %q", got, data)
			}
			if bytes.Contains(out, []byte("secret")) {
				t.Errorf("the user's config shows through the encoding")
			}

			want := wantFiles(add)
			checkFileCount(t, len(cfg.Storage.Files), want)
			for _, f := range cfg.Storage.Files {
				if f.Overwrite == nil || !*f.Overwrite {
					t.Errorf("%s: overwrite not set", f.Path)
				}
				if f.Contents.Source == nil {
					t.Fatalf("%s: no contents", f.Path)
				}
				checkFile(t, want, f.Path, f.Mode, decodeDataURL(t, *f.Contents.Source))
			}

			users := cfg.Passwd.Users
			if len(users) != 1 || users[0].Name != "capkv" || len(users[0].SSHAuthorizedKeys) != 1 ||
				string(users[0].SSHAuthorizedKeys[0]) != testUserKey {
				t.Errorf("users = %+v, want capkv with the test key", users)
			}
		})
	}
}

func TestRenderIgnitionV2(t *testing.T) {
	add := fullAdditions(t)
	cases := map[string][]byte{
		"CABPK":  cabpkIgnition(t),
		"2.2.0":  []byte(`{"ignition":{"version":"2.2.0"}}`),
		"2.0.0":  []byte(`{"ignition":{"version":"2.0.0"}}`),
		"spaces": []byte(" {\n \"ignition\" : { \"version\" : \"2.3.0\" } }\n"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(FormatIgnition, data, add)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			// Flatcar's parser for spec 2.3, the version CABPK emits,
			// also accepts and translates 2.0 to 2.2.
			cfg, rpt, err := ign23.Parse(out)
			if err != nil {
				t.Fatalf("Ignition 2.3 rejects the parent config: %v\n%s", err, rpt)
			}
			if len(rpt.Entries) != 0 && name != "2.0.0" {
				t.Errorf("Ignition reports on the parent config:\n%s", rpt)
			}
			appended := cfg.Ignition.Config.Append
			if len(appended) != 1 {
				t.Fatalf("want one appended config, got %+v", appended)
			}
			if got := decodeDataURL(t, appended[0].Source); !bytes.Equal(got, data) {
				t.Errorf("appended config changed:\n got %q\nwant %q", got, data)
			}

			want := wantFiles(add)
			checkFileCount(t, len(cfg.Storage.Files), want)
			for _, f := range cfg.Storage.Files {
				if f.Filesystem != "root" {
					t.Errorf("%s: filesystem %q, want root", f.Path, f.Filesystem)
				}
				checkFile(t, want, f.Path, f.Mode, decodeDataURL(t, f.Contents.Source))
			}

			users := cfg.Passwd.Users
			if len(users) != 1 || users[0].Name != "capkv" || len(users[0].SSHAuthorizedKeys) != 1 ||
				string(users[0].SSHAuthorizedKeys[0]) != testUserKey {
				t.Errorf("users = %+v, want capkv with the test key", users)
			}
			// Spec 2.0 only creates users it is asked to create.
			if created := users[0].Create != nil; created != (name == "2.0.0") {
				t.Errorf("user create set = %v, want it only for spec 2.0", created)
			}
		})
	}
}

func TestRenderIgnitionErrors(t *testing.T) {
	const secret = "s3cr3t-token"
	cases := map[string]struct {
		data string
		want string
	}{
		"not JSON":           {"#cloud-config\ntoken: " + secret, "not valid Ignition JSON"},
		"broken JSON":        {`{"ignition": ` + secret + `}`, "byte offset"},
		"trailing data":      {`{"ignition":{"version":"3.4.0"}} ` + secret, "byte offset"},
		"array":              {`["` + secret + `"]`, "top level"},
		"version not string": {`{"ignition":{"version":3}, "x":"` + secret + `"}`, "ignition.version"},
		"no version":         {`{"passwd":{"users":[{"name":"` + secret + `"}]}}`, "missing"},
		"malformed version":  {`{"ignition":{"version":"` + secret + `"}}`, "not an Ignition spec version"},
		"unsupported major":  {`{"ignition":{"version":"1.0.0"}}`, "major version 1"},
		"future major":       {`{"ignition":{"version":"4.0.0"}}`, "major version 4"},
		"empty":              {"", "not valid Ignition JSON"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(FormatIgnition, []byte(tc.data), fullAdditions(t))
			if err == nil {
				t.Fatalf("Render succeeded, want an error (output %d bytes)", len(out))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "'s'") {
				t.Errorf("error %q quotes the user's data", err)
			}
		})
	}
}

func TestRenderFilesBothFormats(t *testing.T) {
	add := Additions{Files: []File{{Path: "/etc/systemd/network/10-x.network", Mode: 0o644, Contents: []byte("[Match]\n")}}}
	out, err := Render(FormatCloudConfig, []byte("#cloud-config\n"), add)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	_, parts := parseRendered(t, out)
	cfg := additionsOf(t, parts[1])
	files, _ := cfg["write_files"].([]any)
	if len(files) != 1 {
		t.Fatalf("write_files = %v", cfg["write_files"])
	}
	f := files[0].(map[string]any)
	if f["path"] != "/etc/systemd/network/10-x.network" || f["permissions"] != "0644" || f["encoding"] != "b64" ||
		f["content"] != base64.StdEncoding.EncodeToString([]byte("[Match]\n")) {
		t.Errorf("write_files entry %v", f)
	}
	ign, err := Render(FormatIgnition, []byte(`{"ignition":{"version":"3.4.0"}}`), add)
	if err != nil {
		t.Fatalf("Render ignition: %v", err)
	}
	cfg3, _, err := ign3.Parse(ign)
	if err != nil || len(cfg3.Storage.Files) != 1 || cfg3.Storage.Files[0].Path != "/etc/systemd/network/10-x.network" {
		t.Errorf("ignition files %+v (%v)", cfg3.Storage.Files, err)
	}
	if _, err := Render(FormatCloudConfig, nil, Additions{Files: []File{{Path: "relative"}}}); err == nil {
		t.Error("a relative path was accepted")
	}
}

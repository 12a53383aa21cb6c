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
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"reflect"
	"strings"
	"testing"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/yaml"
)

// parsedPart is one part of a rendered document, as Go's MIME parser sees it.
type parsedPart struct {
	header textproto.MIMEHeader
	// body is the part's body with any base64 transfer encoding undone.
	body []byte
}

// parseRendered checks the top-level structure of a rendered document and
// returns its boundary and parts.
func parseRendered(t *testing.T, out []byte) (string, []parsedPart) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("rendered data is not a MIME message: %v", err)
	}
	if v := msg.Header.Get("MIME-Version"); v != "1.0" {
		t.Errorf("MIME-Version = %q, want 1.0", v)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/mixed" || params["boundary"] == "" {
		t.Fatalf("Content-Type = %q, want multipart/mixed with a boundary", msg.Header.Get("Content-Type"))
	}
	// cloud-init only parses user data as MIME if it sees this early on.
	if !bytes.Contains(bytes.ToLower(out[:min(len(out), 4096)]), []byte("mime-version:")) {
		t.Errorf("no MIME-Version header in the first 4096 bytes")
	}
	var parts []parsedPart
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("part %d: %v", len(parts), err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("part %d body: %v", len(parts), err)
		}
		switch cte := p.Header.Get("Content-Transfer-Encoding"); cte {
		case "":
		case "base64":
			if body, err = decodeBase64Lines(body); err != nil {
				t.Fatalf("part %d: base64: %v", len(parts), err)
			}
		default:
			t.Fatalf("part %d: unexpected Content-Transfer-Encoding %q", len(parts), cte)
		}
		parts = append(parts, parsedPart{header: p.Header, body: body})
	}
	return params["boundary"], parts
}

// additionsOf checks the provider's part and returns its YAML.
func additionsOf(t *testing.T, p parsedPart) map[string]any {
	t.Helper()
	if ct := p.header.Get("Content-Type"); ct != typeCloudConfig {
		t.Errorf("additions part Content-Type = %q, want %q", ct, typeCloudConfig)
	}
	if mt := p.header.Get("Merge-Type"); mt != mergeType {
		t.Errorf("additions part Merge-Type = %q, want %q", mt, mergeType)
	}
	if !bytes.HasPrefix(p.body, []byte("#cloud-config\n")) {
		t.Errorf("additions part does not start with #cloud-config")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(p.body, &cfg); err != nil {
		t.Fatalf("additions part is not YAML: %v", err)
	}
	return cfg
}

func TestRenderCloudConfig(t *testing.T) {
	cabpk, err := cloudinit.NewNode(&cloudinit.NodeInput{
		JoinConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
	})
	if err != nil {
		t.Fatalf("CABPK cloud-config: %v", err)
	}
	cabpkUsers, err := cloudinit.NewNode(&cloudinit.NodeInput{
		BaseUserData: cloudinit.BaseUserData{
			Users: []bootstrapv1.User{{Name: "alice"}},
		},
		JoinConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
	})
	if err != nil {
		t.Fatalf("CABPK cloud-config: %v", err)
	}
	userMIME := "Content-Type: multipart/mixed; boundary=\"user-b\"\nMIME-Version: 1.0\n\n" +
		"preamble\n--user-b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho one\n" +
		"--user-b\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: [two]\n--user-b--\n"
	userMIMEWithUsers := strings.Replace(userMIME, "runcmd: [two]", "users: [alice]", 1)
	gz := gzipped(t, "#cloud-config\nruncmd: [gz]\n")

	cases := map[string]struct {
		data        []byte
		wantType    string // "" for a nested MIME entity
		wantBase64  bool
		wantDefault bool
	}{
		"CABPK cloud-config":        {cabpk, typeNotMultipart, false, true},
		"CABPK cloud-config, users": {cabpkUsers, typeNotMultipart, false, false},
		"Jinja, invalid YAML, users": {[]byte("## template: jinja\n#cloud-config\nhostname: {{ ds.x }}\nusers:\n- a\n"),
			typeNotMultipart, false, false},
		"cloud-config":            {[]byte("#cloud-config\nruncmd: [echo hi]\n"), typeCloudConfig, false, true},
		"cloud-config, CRLF":      {[]byte("#cloud-config\r\nruncmd: [a]\r\n"), typeCloudConfig, false, true},
		"no final newline":        {[]byte("#cloud-config\nruncmd: [a]"), typeCloudConfig, false, true},
		"trailing blank lines":    {[]byte("#cloud-config\n\n\n"), typeCloudConfig, false, true},
		"UTF-8":                   {[]byte("#cloud-config\nruncmd: [echo grüße]\n"), typeCloudConfig, true, true},
		"long line":               {[]byte("#cloud-config\n# " + strings.Repeat("x", 999) + "\n"), typeCloudConfig, true, true},
		"line at the limit":       {[]byte("#cloud-config\n#" + strings.Repeat("x", 997) + "\n"), typeCloudConfig, false, true},
		"bare CR":                 {[]byte("#cloud-config\rruncmd: [a]\n"), typeCloudConfig, true, true},
		"user defines users":      {[]byte("#cloud-config\nusers: [alice]\n"), typeCloudConfig, false, false},
		"script":                  {[]byte("#!/bin/bash\necho hi\n"), typeShellScript, false, true},
		"archive is not a config": {[]byte("#cloud-config-archive\n- content: x\n"), typeNotMultipart, false, true},
		"include":                 {[]byte("#include\nhttp://example.com/x\n"), typeNotMultipart, false, true},
		"gzip":                    {gz, typeGzip, true, true},
		"multipart":               {[]byte(userMIME), "", false, true},
		"multipart, CRLF":         {[]byte(strings.ReplaceAll(userMIME, "\n", "\r\n")), "", false, true},
		"multipart defines users": {[]byte(userMIMEWithUsers), "", false, false},
		"multipart, base64 users": {[]byte(base64UsersMIME), "", false, false},
	}
	add := fullAdditions(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(FormatCloudConfig, tc.data, add)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			boundary, parts := parseRendered(t, out)
			if bytes.Contains(tc.data, []byte(boundary)) {
				t.Errorf("boundary %q occurs in the user's data", boundary)
			}
			if len(parts) != 2 {
				t.Fatalf("got %d parts, want 2", len(parts))
			}

			user := parts[0]
			if tc.wantType == "" {
				// A nested MIME entity must appear verbatim, headers and all.
				if !bytes.Contains(out, []byte("--"+boundary+"\r\n"+string(tc.data)+"\r\n--"+boundary+"\r\n")) {
					t.Errorf("user's MIME document is not embedded unchanged")
				}
				checkNested(t, user, tc.data)
			} else {
				if ct := user.header.Get("Content-Type"); ct != tc.wantType {
					t.Errorf("user part Content-Type = %q, want %q", ct, tc.wantType)
				}
				if got := user.header.Get("Content-Transfer-Encoding") == "base64"; got != tc.wantBase64 {
					t.Errorf("user part base64 = %v, want %v", got, tc.wantBase64)
				}
				if !bytes.Equal(user.body, tc.data) {
					t.Errorf("user part changed:\n got %q\nwant %q", user.body, tc.data)
				}
			}

			cfg := additionsOf(t, parts[1])
			wantUsers := []any{map[string]any{
				"name":                "capkv",
				"ssh_authorized_keys": []any{testUserKey},
				"sudo":                sudoRule,
				"lock_passwd":         true,
			}}
			if tc.wantDefault {
				wantUsers = append([]any{"default"}, wantUsers...)
			}
			if !reflect.DeepEqual(cfg["users"], wantUsers) {
				t.Errorf("users = %#v, want %#v", cfg["users"], wantUsers)
			}
			wantKeys := map[string]any{
				"ed25519_private": string(add.SSHHostKey),
				"ed25519_public":  add.SSHHostPublicKey,
			}
			if !reflect.DeepEqual(cfg["ssh_keys"], wantKeys) {
				t.Errorf("ssh_keys = %#v, want %#v", cfg["ssh_keys"], wantKeys)
			}
			if len(cfg) != 2 {
				t.Errorf("additions set %d top-level keys, want only ssh_keys and users", len(cfg))
			}
		})
	}
}

// base64UsersMIME hides "users" behind a base64 transfer encoding
// ("#cloud-config\nusers: [bob]\n").
const base64UsersMIME = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=xyz\n\n" +
	"--xyz\nContent-Type: text/cloud-config\nContent-Transfer-Encoding: base64\n\n" +
	"I2Nsb3VkLWNvbmZpZwp1c2VyczogW2JvYl0K\n--xyz--\n"

// checkNested parses the embedded user document with the headers it
// carries and checks that its own parts survive.
func checkNested(t *testing.T, p parsedPart, data []byte) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("test data is not MIME: %v", err)
	}
	if got, want := p.header.Get("Content-Type"), msg.Header.Get("Content-Type"); got != want {
		t.Errorf("nested part Content-Type = %q, want the user's %q", got, want)
	}
	want, err := io.ReadAll(msg.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.body, want) {
		t.Errorf("nested part body changed:\n got %q\nwant %q", p.body, want)
	}
	_, params, _ := mime.ParseMediaType(p.header.Get("Content-Type"))
	mr := multipart.NewReader(bytes.NewReader(p.body), params["boundary"])
	n := 0
	for ; ; n++ {
		if _, err := mr.NextPart(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("nested part %d: %v", n, err)
			}
			break
		}
	}
	if n == 0 {
		t.Errorf("nested document has no parts")
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRenderCloudConfigPartialAdditions(t *testing.T) {
	key, pub := testHostKey(t)
	cases := map[string]struct {
		add      Additions
		wantKeys []string
	}{
		"host key only": {Additions{SSHHostKey: key, SSHHostPublicKey: pub}, []string{"ssh_keys"}},
		"user only": {Additions{SSHUser: "capkv", SSHAuthorizedKeys: []string{testUserKey}},
			[]string{"users"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(FormatCloudConfig, []byte("#cloud-config\n"), tc.add)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			_, parts := parseRendered(t, out)
			if len(parts) != 2 {
				t.Fatalf("got %d parts, want 2", len(parts))
			}
			cfg := additionsOf(t, parts[1])
			var got []string
			for k := range cfg {
				got = append(got, k)
			}
			if !reflect.DeepEqual(got, tc.wantKeys) {
				t.Errorf("additions keys = %v, want %v", got, tc.wantKeys)
			}
		})
	}
}

func TestRenderCloudConfigEmptyData(t *testing.T) {
	out, err := Render(FormatCloudConfig, nil, fullAdditions(t))
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	_, parts := parseRendered(t, out)
	if len(parts) != 1 {
		t.Fatalf("got %d parts, want only the additions", len(parts))
	}
	additionsOf(t, parts[0])
}

func TestRenderCloudConfigDeterministic(t *testing.T) {
	// One Additions value: OpenSSH private keys embed a random check value.
	data, add := []byte("#cloud-config\nruncmd: [a]\n"), fullAdditions(t)
	first, err := Render(FormatCloudConfig, data, add)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	second, err := Render(FormatCloudConfig, data, add)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("rendering the same input twice gave different output")
	}
}

func TestChooseBoundary(t *testing.T) {
	candidates := func(i int) string { return fmt.Sprintf("cand-%d", i) }
	cases := map[string]struct {
		bodies [][]byte
		want   string
	}{
		"first is free":         {[][]byte{[]byte("nothing here")}, "cand-0"},
		"first two in one body": {[][]byte{[]byte("x cand-0 y cand-1 z")}, "cand-2"},
		"spread over bodies":    {[][]byte{[]byte("cand-0"), []byte("--cand-1--")}, "cand-2"},
		"no bodies":             {nil, "cand-0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := chooseBoundary(candidates, tc.bodies...); got != tc.want {
				t.Errorf("chooseBoundary = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRenderBoundaryAvoidsData feeds the renderer data that contains the
// boundary it would otherwise pick.
func TestRenderBoundaryAvoidsData(t *testing.T) {
	add := fullAdditions(t)
	data := []byte("#cloud-config\nruncmd: [a]\n")
	out, err := Render(FormatCloudConfig, data, add)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	first, _ := parseRendered(t, out)

	// Carrying the first boundary changes the data, and so the candidates;
	// repeat until the data holds the boundary its own render would pick.
	for i := 0; i < 3; i++ {
		data = append(data, []byte("# --"+first+"\n")...)
		out, err = Render(FormatCloudConfig, data, add)
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		boundary, parts := parseRendered(t, out)
		if bytes.Contains(data, []byte(boundary)) {
			t.Fatalf("boundary %q occurs in the user's data", boundary)
		}
		if len(parts) != 2 || !bytes.Equal(parts[0].body, data) {
			t.Fatalf("user part did not survive a data that holds earlier boundaries")
		}
		first = boundary
	}
}

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
	"crypto/ed25519"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testHostKey returns a real OpenSSH ed25519 private key and its public
// line, derived from a fixed seed so failures are reproducible.
func testHostKey(t *testing.T) ([]byte, string) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatalf("marshal host key: %v", err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatalf("host public key: %v", err)
	}
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

const testUserKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGm0dFhJqR1c8dXf1mXw3b4rkq6b0bJ2v1o3YyYb0Cq capkv@test"

// fullAdditions adds everything the provider can add.
func fullAdditions(t *testing.T) Additions {
	key, pub := testHostKey(t)
	return Additions{
		SSHHostKey:        key,
		SSHHostPublicKey:  pub,
		SSHUser:           "capkv",
		SSHAuthorizedKeys: []string{testUserKey},
	}
}

func TestAdditionsEmpty(t *testing.T) {
	cases := map[string]struct {
		add  Additions
		want bool
	}{
		"zero":            {Additions{}, true},
		"empty key slice": {Additions{SSHHostKey: []byte{}, SSHAuthorizedKeys: []string{}}, true},
		"host key":        {Additions{SSHHostKey: []byte("k")}, false},
		"host public key": {Additions{SSHHostPublicKey: "k"}, false},
		"user":            {Additions{SSHUser: "u"}, false},
		"authorized keys": {Additions{SSHAuthorizedKeys: []string{"k"}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.add.Empty(); got != tc.want {
				t.Errorf("Empty() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenderPassthrough(t *testing.T) {
	inputs := map[string]struct {
		format string
		data   []byte
	}{
		"cloud-config":           {FormatCloudConfig, []byte("#cloud-config\nruncmd: [true]\n")},
		"script":                 {FormatCloudConfig, []byte("#!/bin/sh\necho hi\n")},
		"binary":                 {FormatCloudConfig, []byte{0x1f, 0x8b, 0, 0xff, '\r'}},
		"default format":         {"", []byte("#cloud-config\n")},
		"ignition":               {FormatIgnition, []byte(`{"ignition":{"version":"3.4.0"}}`)},
		"invalid ignition kept":  {FormatIgnition, []byte("not json")},
		"nil cloud-config input": {FormatCloudConfig, nil},
	}
	for name, tc := range inputs {
		t.Run(name, func(t *testing.T) {
			got, err := Render(tc.format, tc.data, Additions{})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Errorf("Render changed the data:\n got %q\nwant %q", got, tc.data)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	full := fullAdditions(t)
	with := func(change func(*Additions)) Additions {
		a := full
		a.SSHAuthorizedKeys = append([]string(nil), full.SSHAuthorizedKeys...)
		change(&a)
		return a
	}
	cases := map[string]struct {
		format string
		add    Additions
		want   []string
	}{
		"unknown format": {"yaml", full, []string{`"yaml"`, `"cloud-config"`, `"ignition"`}},
		"unknown format, nothing added": {
			"Ignition", Additions{}, []string{`"cloud-config"`, `"ignition"`}},
		"host key without public key": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHHostPublicKey = "" }), []string{"set together"}},
		"public key without host key": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHHostKey = nil }), []string{"set together"}},
		"host key not OpenSSH PEM": {FormatCloudConfig,
			with(func(a *Additions) {
				a.SSHHostKey = []byte("-----BEGIN RSA PRIVATE KEY-----\nAA==\n-----END RSA PRIVATE KEY-----\n")
			}),
			[]string{"OPENSSH PRIVATE KEY"}},
		"multi-line host public key": {FormatIgnition,
			with(func(a *Additions) { a.SSHHostPublicKey += "\nssh-rsa AAAA" }), []string{"single"}},
		"user without keys": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHAuthorizedKeys = nil }), []string{"set together"}},
		"keys without user": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHUser = "" }), []string{"set together"}},
		"user name with a dot": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHUser = "capk.v" }), []string{"not a valid user name"}},
		"user name with a slash": {FormatIgnition,
			with(func(a *Additions) { a.SSHUser = "../etc" }), []string{"not a valid user name"}},
		"multi-line authorized key": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHAuthorizedKeys = append(a.SSHAuthorizedKeys, testUserKey+"\n"+testUserKey) }),
			[]string{"SSHAuthorizedKeys[1]", "single"}},
		"blank authorized key": {FormatCloudConfig,
			with(func(a *Additions) { a.SSHAuthorizedKeys = []string{" "} }), []string{"SSHAuthorizedKeys[0]", "empty"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(`{"ignition":{"version":"3.4.0"}}`)
			if tc.format == FormatCloudConfig {
				data = []byte("#cloud-config\n")
			}
			got, err := Render(tc.format, data, tc.add)
			if err == nil {
				t.Fatalf("Render succeeded, want an error (output %d bytes)", len(got))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "PRIVATE KEY-----\n") || strings.Contains(err.Error(), "AAAA") {
				t.Errorf("error %q quotes key material", err)
			}
		})
	}
}

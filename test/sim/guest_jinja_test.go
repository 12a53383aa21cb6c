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

import "testing"

func TestJinjaCloudConfig(t *testing.T) {
	good := "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    name: {{ ds.meta_data.local_hostname }}\nruncmd:\n- kubeadm init\n"
	if err := validateUserData(&Bootstrap{Format: "cloud-config", Data: []byte(good)}); err != nil {
		t.Errorf("CABPK-style Jinja cloud-config refused: %v", err)
	}
	bad := "## template: jinja\n#cloud-config\nruncmd: [unclosed\n"
	if err := validateUserData(&Bootstrap{Format: "cloud-config", Data: []byte(bad)}); err == nil {
		t.Error("a Jinja template rendering invalid YAML was accepted")
	}
}

// TestBase64PartsAreDecoded: cloud-init decodes a part's base64 transfer
// encoding before it reads the part, as the provider's long write_files
// parts need.
func TestBase64PartsAreDecoded(t *testing.T) {
	multipart := func(body string) *Bootstrap {
		return &Bootstrap{Format: "cloud-config", Data: []byte("Content-Type: multipart/mixed; boundary=b\nMIME-Version: 1.0\n\n--b\n" +
			"Content-Type: text/cloud-config\nContent-Transfer-Encoding: base64\n\n" + body + "\n--b--\n")}
	}
	// "#cloud-config\nruncmd: [kubeadm init]\n", wrapped as RFC 2045 wraps it.
	good := "I2Nsb3VkLWNvbmZpZwpy\ndW5jbWQ6IFtrdWJlYWRtIGluaXRdCg=="
	if err := validateUserData(multipart(good)); err != nil {
		t.Errorf("a base64 cloud-config part refused: %v", err)
	}
	// "#cloud-config\nruncmd: [unclosed\n"
	if err := validateUserData(multipart("I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFt1bmNsb3NlZAo=")); err == nil {
		t.Error("a base64 part of invalid YAML was accepted")
	}
}

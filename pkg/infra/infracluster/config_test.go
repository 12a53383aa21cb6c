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

package infracluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const kubeconfigHead = `apiVersion: v1
kind: Config
current-context: infra
contexts:
- name: infra
  context: {cluster: infra, user: capkv}
clusters:
- name: infra
  cluster:
    server: https://infra.example:6443
`

func TestRestConfigRefusesWhatReachesOutsideTheSecret(t *testing.T) {
	tests := []struct {
		name, tail, wantErr string
	}{
		{"inline token", "    certificate-authority-data: Zm9v\nusers:\n- name: capkv\n  user: {token: abc}\n", ""},
		{"exec plugin", "users:\n- name: capkv\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n", "credential plugin"},
		{"auth provider", "users:\n- name: capkv\n  user:\n    auth-provider: {name: oidc}\n", "credential plugin"},
		{"service account token file", "users:\n- name: capkv\n  user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}\n", "files"},
		{"client key file", "users:\n- name: capkv\n  user: {client-certificate: /etc/cert, client-key: /etc/key}\n", "files"},
		{"CA file", "    certificate-authority: /etc/ca.crt\nusers:\n- name: capkv\n  user: {token: abc}\n", "CA from a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := restConfig([]byte(kubeconfigHead + tt.tail))
			if tt.wantErr == "" {
				if err != nil || cfg.BearerToken != "abc" || cfg.Timeout != externalTimeout {
					t.Fatalf("cfg %+v err %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
	if _, err := restConfig([]byte("token: s3cret-value\n[")); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("invalid kubeconfig: err %v must not quote the content", err)
	}
}

func TestResolveRefusesSecretsOfOtherNamespaces(t *testing.T) {
	_, err := Resolve(context.Background(), nil, nil, &corev1.ObjectReference{Kind: "Secret", Name: "infra", Namespace: "other-tenant"}, "tenant", []string{"capkv-system"})
	if err == nil || !strings.Contains(err.Error(), "allows that only for capkv-system") {
		t.Errorf("err %v", err)
	}
}

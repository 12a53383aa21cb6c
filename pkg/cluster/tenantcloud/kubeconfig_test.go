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

package tenantcloud

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeconfigIsSelfContained(t *testing.T) {
	g := NewWithT(t)
	a := Access{Server: "https://10.96.0.1:443", CAData: []byte("ca"), Namespace: "tenants", ServiceAccount: "c-tenant-cloud", ServiceAccountUID: "u1"}
	data, err := Kubeconfig(a, "t0ken")
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.Load(data)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := cfg.Contexts[cfg.CurrentContext]
	g.Expect(ctx.Namespace).To(Equal("tenants"))
	g.Expect(cfg.Clusters[ctx.Cluster].Server).To(Equal(a.Server))
	g.Expect(cfg.Clusters[ctx.Cluster].CertificateAuthorityData).To(Equal([]byte("ca")))
	g.Expect(cfg.AuthInfos[ctx.AuthInfo].Token).To(Equal("t0ken"))
	g.Expect(cfg.AuthInfos[ctx.AuthInfo].TokenFile).To(Equal("/etc/kubernetes/infra/token"), "re-read by client-go: rotation without a restart")
	rest, err := clientcmd.RESTConfigFromKubeConfig(data)
	g.Expect(err).NotTo(HaveOccurred(), "a token inline and a token file are one method to client-go")
	g.Expect(rest.BearerToken).To(Equal("t0ken"))
	g.Expect(rest.BearerTokenFile).To(Equal("/etc/kubernetes/infra/token"))
}

func TestAccessHash(t *testing.T) {
	base := Access{Server: "https://a", CAData: []byte("ca"), Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u1"}
	for name, changed := range map[string]Access{
		"server":                 {Server: "https://b", CAData: base.CAData, Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u1"},
		"CA":                     {Server: "https://a", CAData: []byte("other"), Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u1"},
		"namespace":              {Server: "https://a", CAData: base.CAData, Namespace: "other", ServiceAccount: "sa", ServiceAccountUID: "u1"},
		"ServiceAccount":         {Server: "https://a", CAData: base.CAData, Namespace: "ns", ServiceAccount: "other", ServiceAccountUID: "u1"},
		"ServiceAccount created": {Server: "https://a", CAData: base.CAData, Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u2"},
		"parts shifted":          {Server: "https://ans", CAData: base.CAData, Namespace: "", ServiceAccount: "sa", ServiceAccountUID: "u1"},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(changed.Hash()).NotTo(Equal(base.Hash()))
		})
	}
	NewWithT(t).Expect(base.Hash()).To(Equal(Access{Server: "https://a", CAData: []byte("ca"), Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u1"}.Hash()))
}

func TestRenewalTime(t *testing.T) {
	issued := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	NewWithT(t).Expect(RenewalTime(issued, issued.Add(24*time.Hour))).To(Equal(issued.Add(19*time.Hour + 12*time.Minute)))
	NewWithT(t).Expect(RenewalTime(issued, issued.Add(10*time.Minute))).To(Equal(issued.Add(8 * time.Minute)))
}

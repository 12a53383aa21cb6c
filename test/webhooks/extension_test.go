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

package webhooks_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/inplace"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// callExtension posts a Runtime SDK request to the manager's webhook
// server at path, trusting only its serving CA, as Cluster API's runtime
// client does with the ExtensionConfig's caBundle.
func callExtension(g Gomega, path string, req, resp any) {
	wh := env.WebhookInstallOptions
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(wh.LocalServingCAData)).To(BeTrue())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	body, err := json.Marshal(req)
	g.Expect(err).NotTo(HaveOccurred())
	r, err := c.Post("https://"+testenv.WebhookAddress(&wh)+path, "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Body.Close()
	g.Expect(r.StatusCode).To(Equal(http.StatusOK))
	g.Expect(json.NewDecoder(r.Body).Decode(resp)).To(Succeed())
}

// TestInPlaceExtensionIsServed calls the manager's webhook server as
// Cluster API's runtime client does after reading the ExtensionConfig:
// discovery lists the three in-place hooks, and a hook answers at the
// path Cluster API derives from its name.
func TestInPlaceExtensionIsServed(t *testing.T) {
	g := NewWithT(t)
	discovery := &runtimehooksv1.DiscoveryResponse{}
	callExtension(g, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", &runtimehooksv1.DiscoveryRequest{}, discovery)
	g.Expect(discovery.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	hooks := map[string]string{}
	for _, h := range discovery.Handlers {
		hooks[h.Name] = h.RequestHook.Hook
		g.Expect(h.RequestHook.APIVersion).To(Equal(runtimehooksv1.GroupVersion.String()))
		g.Expect(*h.FailurePolicy).To(Equal(runtimehooksv1.FailurePolicyFail))
	}
	g.Expect(hooks).To(Equal(map[string]string{
		inplace.CanUpdateMachineHandler:    "CanUpdateMachine",
		inplace.CanUpdateMachineSetHandler: "CanUpdateMachineSet",
		inplace.UpdateMachineHandler:       "UpdateMachine",
	}))

	req := &runtimehooksv1.CanUpdateMachineSetRequest{}
	other := []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"DockerMachineTemplate"}`)
	req.Current.InfrastructureMachineTemplate.Raw, req.Desired.InfrastructureMachineTemplate.Raw = other, other
	resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
	callExtension(g, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachineset/"+inplace.CanUpdateMachineSetHandler, req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.Message).To(Equal("not a KubevirtMachineTemplate"))
}

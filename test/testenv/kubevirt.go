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

package testenv

import (
	"context"
	"crypto/x509"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Images virt-controller writes into the pods it creates. Nothing pulls
// them here; they name what a v1.7.0 cluster would run.
const (
	LauncherImage = "quay.io/kubevirt/virt-launcher:" + KubeVirtVersion
	exporterImage = "quay.io/kubevirt/virt-exportserver:" + KubeVirtVersion
	sidecarImage  = "quay.io/kubevirt/sidecar-shim:" + KubeVirtVersion
)

// skippedKinds are parts of the install set the world does not apply: the
// CRDs are installed with the environment, the Deployments are replaced by
// the processes started here.
var skippedKinds = map[string]bool{"CustomResourceDefinition": true, "Deployment": true}

// StartKubeVirt installs KubeVirt's control plane as virt-operator would:
// its namespace, RBAC, Services, ConfigMaps, admission policy and KubeVirt
// CR from KubeVirt's own install set (the CR as the install leaves it: no
// feature gates, no workload update methods; see PatchKubeVirt),
// certificates signed by a CA published in the kubevirt-ca ConfigMap,
// then runs virt-api on the ClusterIP of its Service (where the API
// server's webhooks and aggregated APIs reach it) and virt-controller,
// each authenticated as its service account, and registers virt-api's
// webhooks and APIServices. virt-operator itself and virt-handler do not
// run; the simulator plays virt-handler.
func (e *Env) StartKubeVirt(ctx context.Context) error {
	return e.startComponent(ctx, &operatorComponent{
		dir: "kubevirt", namespace: KubeVirtNamespace, install: KubeVirtInstall, caName: "kubevirt-ca",
		prepare:   prepareKubeVirtObject,
		installed: e.markKubeVirtDeployed,
		api: aggregatedAPIServer{
			service: "virt-api", process: "virt-api", account: "kubevirt-apiserver",
			endpoint: virtAPIEndpoint, apiService: "v1.subresources.kubevirt.io",
			flags: virtAPIFlags,
		},
		ctrl: componentController{
			process: "virt-controller", account: "kubevirt-controller", lease: "virt-controller",
			env:   []string{"SIDECAR_SHIM_IMAGE=" + sidecarImage},
			flags: virtControllerFlags,
		},
	})
}

// prepareKubeVirtObject leaves out what the world does not apply and
// publishes the CA in the kubevirt-ca ConfigMap, where virt-api and
// virt-controller read which certificates to trust.
func prepareKubeVirtObject(o *unstructured.Unstructured, ca *keyPair) (bool, error) {
	switch {
	case skippedKinds[o.GetKind()] || o.GetName() == "virt-operator-validator":
		// virt-operator's own webhook guards the KubeVirt CR
		// against a running operator, which the world lacks.
		return false, nil
	case o.GetKind() == "ConfigMap" && o.GetName() == "kubevirt-ca":
		return true, unstructured.SetNestedField(o.Object, string(ca.certPEM()), "data", "ca-bundle")
	}
	return true, nil
}

// virtAPIFlags gives virt-api the client certificate it calls
// virt-handler with, and serves only its subresource API, as
// virt-operator runs it.
func virtAPIFlags(dir string, ca *keyPair) ([]string, error) {
	handlerClient, err := ca.sign("kubevirt.io:system:client:virt-handler", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	handlerCert, handlerKey, err := handlerClient.write(dir, "virt-handler-client")
	if err != nil {
		return nil, err
	}
	return []string{
		"--handler-cert-file", handlerCert, "--handler-key-file", handlerKey,
		"--ca-configmap-name", "kubevirt-ca", "--subresources-only",
	}, nil
}

// virtControllerFlags gives virt-controller a free port, the images it
// writes into pods and the certificate of its metrics endpoint.
func virtControllerFlags(_ context.Context, dir string, ca *keyPair) ([]string, error) {
	controllerPair, err := ca.sign("virt-controller.kubevirt.svc", x509.ExtKeyUsageServerAuth, []string{"virt-controller.kubevirt.svc"}, nil)
	if err != nil {
		return nil, err
	}
	controllerCert, controllerKey, err := controllerPair.write(dir, "virt-controller")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return []string{
		"--listen", "127.0.0.1", "--port", strconv.Itoa(port),
		"--launcher-image", LauncherImage, "--exporter-image", exporterImage,
		"--prom-cert-file", controllerCert, "--prom-key-file", controllerKey, "-v", "2",
	}, nil
}

// markKubeVirtDeployed writes the KubeVirt CR's status as virt-operator
// does once it has installed everything: virt-api and virt-controller take
// their configuration only from a CR with a phase.
func (e *Env) markKubeVirtDeployed(ctx context.Context) error {
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: KubeVirtNamespace, Name: "kubevirt"}, kv); err != nil {
		return err
	}
	status := map[string]any{
		"phase": "Deployed", "defaultArchitecture": "amd64",
		"observedKubeVirtVersion": KubeVirtVersion, "targetKubeVirtVersion": KubeVirtVersion,
		"observedKubeVirtRegistry": "quay.io/kubevirt", "targetKubeVirtRegistry": "quay.io/kubevirt",
	}
	if err := unstructured.SetNestedMap(kv.Object, status, "status"); err != nil {
		return err
	}
	if err := e.Client.Status().Update(ctx, kv); err != nil {
		return fmt.Errorf("marking KubeVirt deployed: %w", err)
	}
	return nil
}

// KubeVirtHandlerConfig reaches the API server as virt-handler's service
// account: virt-api keeps VMI status changes only from KubeVirt's own
// service accounts, so whoever plays virt-handler writes as it.
func (e *Env) KubeVirtHandlerConfig() (*rest.Config, error) {
	user, err := e.ControlPlane.AddUser(serviceAccountUser(KubeVirtNamespace, "kubevirt-handler"), nil)
	if err != nil {
		return nil, err
	}
	cfg := user.Config()
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg, nil
}

// virtAPIEndpoint is the address the world publishes for virt-api's
// Service (TEST-NET-1, RFC 5737): the API server's aggregator counts an
// APIService available only if its Service has a ready endpoint, but it
// sends the requests to the ClusterIP, where virt-api listens; an
// EndpointSlice may not hold a loopback address.
const virtAPIEndpoint = "192.0.2.1"

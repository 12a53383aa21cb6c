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
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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

// deferredKinds call virt-api, so they are applied once it serves.
var deferredKinds = map[string]bool{"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "APIService": true}

// StartKubeVirt installs KubeVirt's control plane as virt-operator would:
// its namespace, RBAC, Services, ConfigMaps, admission policy and KubeVirt
// CR from KubeVirt's own install set (the CR as the install leaves it: no
// feature gates, no workload update methods; see PatchKubeVirt), certificates signed by a CA published
// in the kubevirt-ca ConfigMap, then runs virt-api on the ClusterIP of its
// Service (where the API server's webhooks and aggregated APIs reach it)
// and virt-controller, each authenticated as its service account, and
// registers virt-api's webhooks and APIServices. virt-operator itself and
// virt-handler do not run; the simulator plays virt-handler.
func (e *Env) StartKubeVirt(ctx context.Context) error {
	objs, err := KubeVirtInstall()
	if err != nil {
		return err
	}
	if _, err := e.componentsKubeconfig(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubeVirtNamespace}}
	if err := e.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", KubeVirtNamespace, err)
	}
	ca, err := newCA("kubevirt-ca")
	if err != nil {
		return err
	}
	var deferred []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case skippedKinds[o.GetKind()] || o.GetName() == "virt-operator-validator":
			// virt-operator's own webhook guards the KubeVirt CR
			// against a running operator, which the world lacks.
			continue
		case deferredKinds[o.GetKind()]:
			deferred = append(deferred, o)
			continue
		case o.GetKind() == "ConfigMap" && o.GetName() == "kubevirt-ca":
			o = o.DeepCopy()
			_ = unstructured.SetNestedField(o.Object, string(ca.certPEM()), "data", "ca-bundle")
		}
		if err := e.apply(ctx, o.DeepCopy()); err != nil {
			return err
		}
	}
	if err := e.markKubeVirtDeployed(ctx); err != nil {
		return err
	}

	svc := &corev1.Service{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: KubeVirtNamespace, Name: "virt-api"}, svc); err != nil {
		return err
	}
	apiIP := net.ParseIP(svc.Spec.ClusterIP)
	if apiIP == nil || !apiIP.IsLoopback() {
		return fmt.Errorf("service virt-api has ClusterIP %q, not on loopback where the world can serve it", svc.Spec.ClusterIP)
	}
	dir := filepath.Join(e.componentsDir, "kubevirt")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	serving, err := ca.sign("virt-api.kubevirt.svc", x509.ExtKeyUsageServerAuth,
		[]string{"virt-api", "virt-api.kubevirt", "virt-api.kubevirt.svc", "virt-api.kubevirt.svc.cluster.local"}, []net.IP{apiIP})
	if err != nil {
		return err
	}
	servingCert, servingKey, err := serving.write(dir, "virt-api")
	if err != nil {
		return err
	}
	handlerClient, err := ca.sign("kubevirt.io:system:client:virt-handler", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	handlerCert, handlerKey, err := handlerClient.write(dir, "virt-handler-client")
	if err != nil {
		return err
	}
	controllerPair, err := ca.sign("virt-controller.kubevirt.svc", x509.ExtKeyUsageServerAuth, []string{"virt-controller.kubevirt.svc"}, nil)
	if err != nil {
		return err
	}
	controllerCert, controllerKey, err := controllerPair.write(dir, "virt-controller")
	if err != nil {
		return err
	}

	apiKubeconfig, err := e.serviceAccountKubeconfig(dir, KubeVirtNamespace, "kubevirt-apiserver")
	if err != nil {
		return err
	}
	if err := e.startProcess(BinDir(), "virt-api", "virt-api", []string{
		"--kubeconfig", apiKubeconfig, "--listen", apiIP.String(), "--port", "443",
		"--tls-cert-file", servingCert, "--tls-key-file", servingKey,
		"--handler-cert-file", handlerCert, "--handler-key-file", handlerKey,
		"--ca-configmap-name", "kubevirt-ca", "--subresources-only", "-v", "2",
	}); err != nil {
		return err
	}
	if err := waitServing(ctx, ca, "virt-api.kubevirt.svc", net.JoinHostPort(apiIP.String(), "443")); err != nil {
		// Port 443 is privileged: the world runs as root, as CI does.
		return fmt.Errorf("virt-api on the ClusterIP of its Service, port 443 (binding it needs root): %w (log: %s)",
			err, filepath.Join(e.componentsDir, "virt-api.log"))
	}
	for _, o := range deferred {
		o = o.DeepCopy()
		if err := setCABundle(o, ca.certPEM()); err != nil {
			return err
		}
		if err := e.apply(ctx, o); err != nil {
			return err
		}
	}

	if err := e.publishVirtAPIEndpoint(ctx); err != nil {
		return err
	}
	if err := e.waitAPIServiceAvailable(ctx, "v1.subresources.kubevirt.io"); err != nil {
		return err
	}

	controllerKubeconfig, err := e.serviceAccountKubeconfig(dir, KubeVirtNamespace, "kubevirt-controller")
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	started := time.Now()
	if err := e.startProcessEnv(BinDir(), "virt-controller", "virt-controller", []string{
		"--kubeconfig", controllerKubeconfig, "--listen", "127.0.0.1", "--port", strconv.Itoa(port),
		"--launcher-image", LauncherImage, "--exporter-image", exporterImage,
		"--prom-cert-file", controllerCert, "--prom-key-file", controllerKey, "-v", "2",
	}, []string{"SIDECAR_SHIM_IMAGE=" + sidecarImage}); err != nil {
		return err
	}
	if err := e.waitLeader(ctx, KubeVirtNamespace, "virt-controller", started); err != nil {
		return fmt.Errorf("%w (log: %s)", err, filepath.Join(e.componentsDir, "virt-controller.log"))
	}
	return nil
}

// apply creates o, or replaces what a world started earlier from the same
// state left (its certificates are new).
func (e *Env) apply(ctx context.Context, o *unstructured.Unstructured) error {
	err := e.Client.Create(ctx, o)
	if apierrors.IsAlreadyExists(err) {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		if err = e.Client.Get(ctx, client.ObjectKeyFromObject(o), existing); err == nil {
			o.SetResourceVersion(existing.GetResourceVersion())
			if o.GetKind() == "Service" {
				// A Service's ClusterIP cannot change.
				o = existing
			}
			err = e.Client.Update(ctx, o)
		}
	}
	if err != nil {
		return fmt.Errorf("installing %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
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

func serviceAccountUser(namespace, name string) envtest.User {
	return envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// serviceAccountKubeconfig writes a kubeconfig whose client certificate
// authenticates as the service account: RBAC binds service account
// subjects by user name, so the component gets exactly the permissions
// virt-operator grants it.
func (e *Env) serviceAccountKubeconfig(dir, namespace, name string) (string, error) {
	user, err := e.ControlPlane.AddUser(serviceAccountUser(namespace, name), nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// setCABundle trusts ca in every client config of a webhook configuration
// or APIService.
func setCABundle(o *unstructured.Unstructured, caPEM []byte) error {
	ca := base64.StdEncoding.EncodeToString(caPEM)
	if o.GetKind() == "APIService" {
		return unstructured.SetNestedField(o.Object, ca, "spec", "caBundle")
	}
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	for i := range hooks {
		h, ok := hooks[i].(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: webhook %d is not an object", o.GetKind(), o.GetName(), i)
		}
		if err := unstructured.SetNestedField(h, ca, "clientConfig", "caBundle"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

// componentStartTimeout bounds each wait for a world component to come
// up (serving, available, leading). Alone, each takes a few seconds; with
// four worlds starting at once on 2 cores, virt-api once took more than a
// minute to listen, so the bound only catches one that never comes up.
const componentStartTimeout = 3 * time.Minute

// waitServing waits until addr completes a TLS handshake with a
// certificate of ca and answers /healthz.
func waitServing(ctx context.Context, ca *keyPair, serverName, addr string) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	defer httpClient.CloseIdleConnections()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		last = fmt.Errorf("/healthz answered %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("not serving on %s within %s: %w", addr, componentStartTimeout, errors.Join(err, last))
	}
	return nil
}

// virtAPIEndpoint is the address the world publishes for virt-api's
// Service (TEST-NET-1, RFC 5737): the API server's aggregator counts an
// APIService available only if its Service has a ready endpoint, but it
// sends the requests to the ClusterIP, where virt-api listens; an
// EndpointSlice may not hold a loopback address.
const virtAPIEndpoint = "192.0.2.1"

// publishVirtAPIEndpoint does for virt-api's Service what the EndpointSlice
// controller would do for the pod virt-operator runs.
func (e *Env) publishVirtAPIEndpoint(ctx context.Context) error {
	return e.publishEndpoint(ctx, KubeVirtNamespace, "virt-api", virtAPIEndpoint, 8443)
}

// waitAPIServiceAvailable waits until the aggregator reaches an APIService.
func (e *Env) waitAPIServiceAvailable(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		svc := &unstructured.Unstructured{}
		svc.SetAPIVersion("apiregistration.k8s.io/v1")
		svc.SetKind("APIService")
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, svc); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not available within %s (%s): %w", name, componentStartTimeout, last, err)
	}
	return nil
}

// waitLeader waits until a component holds its leader election Lease,
// renewed since it started (a world resumed from kept state finds the
// Lease of the process before).
func (e *Env) waitLeader(ctx context.Context, namespace, lease string, since time.Time) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		last = e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lease}, l)
		if apierrors.IsNotFound(last) {
			return false, nil
		}
		return last == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" &&
			l.Spec.RenewTime != nil && !l.Spec.RenewTime.Before(&metav1.MicroTime{Time: since.Truncate(time.Second)}), last
	})
	if err != nil {
		return fmt.Errorf("%s took no leader Lease within %s: %w", lease, componentStartTimeout, errors.Join(err, last))
	}
	return nil
}

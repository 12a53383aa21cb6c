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
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CDIVersion is the CDI release whose controller and API server the world
// runs (hack/tools/cdi pins it).
const CDIVersion = "v1.64.0"

// CDINamespace is where the world installs CDI, the namespace CDI's
// components assume outside a pod.
const CDINamespace = "cdi"

// cdiInstallSet is what CDI's operator would install, dumped by
// hack/build-tools.sh from the operator's own resource factories.
var cdiInstallSet = &installSet{file: "cdi-install.yaml", what: "CDI's"}

// cdiAPIEndpoint is the address published as cdi-api's endpoint, for the
// aggregator to call the APIService available; the API server reaches
// cdi-api on its ClusterIP, where it listens.
const cdiAPIEndpoint = "192.0.2.2"

// ReleasedCDIFeatureGates are the feature gates the CDI CR of CDI's
// release manifests (cdi-cr.yaml) turns on: CDI then leaves a claim of a
// WaitForFirstConsumer class to its first consumer instead of binding it
// with its own pod, and renders claims labelled for it from their
// StorageProfile.
var ReleasedCDIFeatureGates = []string{"HonorWaitForFirstConsumer", "WebhookPvcRendering"}

// StartCDI installs CDI's control plane as CDI's operator would: its
// namespace, CRDs, RBAC, Services and CDI CR from CDI's own install set,
// then runs cdi-apiserver on the ClusterIP of its Service (where the API
// server's webhooks and aggregated API reach it), registers its webhooks
// and APIService, and runs cdi-controller with the token keys cdi-apiserver
// created and the upload signers, each authenticated as its service
// account. CDI's operator, upload proxy and pods do not run.
func (e *Env) StartCDI(ctx context.Context) error {
	objs, err := cdiInstallSet.read()
	if err != nil {
		return err
	}
	if _, err := e.componentsKubeconfig(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CDINamespace}}
	if err := e.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", CDINamespace, err)
	}
	var deferred []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		switch {
		case o.GetKind() == "Deployment":
			continue
		case o.GetKind() == "CDI":
			if err := unstructured.SetNestedStringSlice(o.Object, ReleasedCDIFeatureGates, "spec", "config", "featureGates"); err != nil {
				return err
			}
		case deferredKinds[o.GetKind()]:
			deferred = append(deferred, o)
			continue
		case o.GetKind() == "RoleBinding":
			// The operator's factory leaves the service accounts'
			// namespace to the binding's.
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if m, ok := s.(map[string]any); ok && m["namespace"] == nil {
					m["namespace"] = o.GetNamespace()
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
		if err := e.apply(ctx, o); err != nil {
			return err
		}
	}

	// The operator copies the CR's configuration into CDIConfig, which
	// cdi-controller reads.
	config := &cdiv1.CDIConfig{ObjectMeta: metav1.ObjectMeta{Name: "config"},
		Spec: cdiv1.CDIConfigSpec{FeatureGates: ReleasedCDIFeatureGates}}
	if err := e.Client.Create(ctx, config); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating CDIConfig: %w", err)
	}

	svc := &corev1.Service{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: CDINamespace, Name: "cdi-api"}, svc); err != nil {
		return err
	}
	apiIP := net.ParseIP(svc.Spec.ClusterIP)
	if apiIP == nil || !apiIP.IsLoopback() {
		return fmt.Errorf("service cdi-api has ClusterIP %q, not on loopback where the world can serve it", svc.Spec.ClusterIP)
	}
	dir := filepath.Join(e.componentsDir, "cdi")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("cdi-apiserver-signer")
	if err != nil {
		return err
	}
	serving, err := ca.sign("cdi-api.cdi.svc", x509.ExtKeyUsageServerAuth,
		[]string{"cdi-api", "cdi-api.cdi", "cdi-api.cdi.svc", "cdi-api.cdi.svc.cluster.local"}, []net.IP{apiIP})
	if err != nil {
		return err
	}
	servingCert, servingKey, err := serving.write(dir, "cdi-apiserver")
	if err != nil {
		return err
	}
	apiKubeconfig, err := e.serviceAccountKubeconfig(dir, CDINamespace, "cdi-apiserver")
	if err != nil {
		return err
	}
	if err := e.startProcess(BinDir(), "cdi-apiserver", "cdi-apiserver", []string{
		"--kubeconfig", apiKubeconfig, "--listen", apiIP.String(), "--port", "443",
		"--tls-cert-file", servingCert, "--tls-key-file", servingKey, "-v", "2",
	}); err != nil {
		return err
	}
	if err := waitServing(ctx, ca, "cdi-api.cdi.svc", net.JoinHostPort(apiIP.String(), "443")); err != nil {
		return fmt.Errorf("cdi-apiserver on the ClusterIP of its Service, port 443 (binding it needs root): %w (log: %s)",
			err, filepath.Join(e.componentsDir, "cdi-apiserver.log"))
	}
	for _, o := range deferred {
		if err := setCABundle(o, ca.certPEM()); err != nil {
			return err
		}
		if err := e.apply(ctx, o); err != nil {
			return err
		}
	}
	if err := e.publishEndpoint(ctx, CDINamespace, "cdi-api", cdiAPIEndpoint, 8443); err != nil {
		return err
	}
	if err := e.waitAPIServiceAvailable(ctx, "v1beta1.upload.cdi.kubevirt.io"); err != nil {
		return err
	}

	keyDir, err := e.writeCDITokenKeys(ctx, dir)
	if err != nil {
		return err
	}
	signers := map[string]string{}
	for _, name := range []string{"cdi-uploadserver-signer", "cdi-uploadserver-client-signer"} {
		if signers[name], err = e.cdiSigner(ctx, dir, name); err != nil {
			return err
		}
	}
	controllerKubeconfig, err := e.serviceAccountKubeconfig(dir, CDINamespace, "cdi-sa")
	if err != nil {
		return err
	}
	started := time.Now()
	if err := e.startProcess(BinDir(), "cdi-controller", "cdi-controller", []string{
		"--kubeconfig", controllerKubeconfig, "--namespace", CDINamespace, "--token-key-dir", keyDir,
		"--uploadserver-signer-dir", signers["cdi-uploadserver-signer"],
		"--uploadserver-client-signer-dir", signers["cdi-uploadserver-client-signer"], "-v", "2",
	}); err != nil {
		return err
	}
	if err := e.waitLeader(ctx, CDINamespace, "cdi-controller-leader-election-helper", started); err != nil {
		return fmt.Errorf("%w (log: %s)", err, filepath.Join(e.componentsDir, "cdi-controller.log"))
	}
	return e.markCDIDeployed(ctx)
}

// markCDIDeployed writes the CDI CR's status as cdi-operator does once
// everything runs (controller-lifecycle-operator-sdk's Status: phase and
// versions), which is what a preflight reads.
func (e *Env) markCDIDeployed(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("cdi.kubevirt.io/v1beta1")
	list.SetKind("CDIList")
	if err := e.Client.List(ctx, list); err != nil {
		return err
	}
	for i := range list.Items {
		cdi := &list.Items[i]
		status := map[string]any{"phase": "Deployed", "observedVersion": CDIVersion, "targetVersion": CDIVersion, "operatorVersion": CDIVersion}
		if err := unstructured.SetNestedMap(cdi.Object, status, "status"); err != nil {
			return err
		}
		// CDI's CRD has no status subresource: the status is written with
		// the object.
		err := e.Client.Status().Update(ctx, cdi)
		if apierrors.IsNotFound(err) {
			err = e.Client.Update(ctx, cdi)
		}
		if err != nil {
			return fmt.Errorf("marking CDI %s deployed: %w", cdi.GetName(), err)
		}
	}
	return nil
}

// writeCDITokenKeys writes the key pair cdi-apiserver keeps in Secret
// cdi-api-signing-key (it creates it on its first start) where
// cdi-controller reads it, as the operator mounts it into its pod.
func (e *Env) writeCDITokenKeys(ctx context.Context, dir string) (string, error) {
	secret := &corev1.Secret{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: CDINamespace, Name: "cdi-api-signing-key"}, secret)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		return "", fmt.Errorf("cdi-apiserver made no Secret cdi-api-signing-key within %s: %w", componentStartTimeout, err)
	}
	keyDir := filepath.Join(dir, "token")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return "", err
	}
	for _, key := range []string{"id_rsa", "id_rsa.pub"} {
		if len(secret.Data[key]) == 0 {
			return "", fmt.Errorf("the Secret cdi-api-signing-key has no %s", key)
		}
		if err := os.WriteFile(filepath.Join(keyDir, key), secret.Data[key], 0o600); err != nil {
			return "", err
		}
	}
	return keyDir, nil
}

// cdiSigner makes a CA for the upload server's certificates, written
// where cdi-controller reads it and published in the bundle ConfigMap
// CDI's components trust, as the operator does.
func (e *Env) cdiSigner(ctx context.Context, dir, name string) (string, error) {
	signer, err := newCA(name)
	if err != nil {
		return "", err
	}
	signerDir := filepath.Join(dir, name)
	if err := os.MkdirAll(signerDir, 0o700); err != nil {
		return "", err
	}
	// tls.crt and tls.key, the names of the Secret the operator mounts.
	if _, _, err := signer.write(signerDir, "tls"); err != nil {
		return "", err
	}
	bundle := &unstructured.Unstructured{}
	bundle.SetAPIVersion("v1")
	bundle.SetKind("ConfigMap")
	bundle.SetNamespace(CDINamespace)
	bundle.SetName(name + "-bundle")
	_ = unstructured.SetNestedField(bundle.Object, string(signer.certPEM()), "data", "ca-bundle.crt")
	return signerDir, e.apply(ctx, bundle)
}

// publishEndpoint publishes addr as the endpoint of a Service, so that the
// aggregator finds one.
func (e *Env) publishEndpoint(ctx context.Context, namespace, service, addr string, port int32) error {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-world", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "world.capkv.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := e.Client.Create(ctx, slice); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("publishing %s's endpoint: %w", service, err)
	}
	return nil
}

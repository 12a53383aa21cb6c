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
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
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
	err := e.startComponent(ctx, &operatorComponent{
		dir: "cdi", namespace: CDINamespace, install: cdiInstallSet.read, caName: "cdi-apiserver-signer",
		prepare:   prepareCDIObject,
		installed: e.writeCDIConfig,
		api: aggregatedAPIServer{
			service: "cdi-api", process: "cdi-apiserver", account: "cdi-apiserver",
			endpoint: cdiAPIEndpoint, apiService: "v1beta1.upload.cdi.kubevirt.io",
		},
		ctrl: componentController{
			process: "cdi-controller", account: "cdi-sa", lease: "cdi-controller-leader-election-helper",
			flags: e.cdiControllerFlags,
		},
	})
	if err != nil {
		return err
	}
	return e.markCDIDeployed(ctx)
}

// prepareCDIObject leaves out the operator's Deployments, turns on the
// released feature gates in the CDI CR and completes RoleBinding subjects.
func prepareCDIObject(o *unstructured.Unstructured, _ *keyPair) (bool, error) {
	switch o.GetKind() {
	case "Deployment":
		return false, nil
	case "CDI":
		return true, unstructured.SetNestedStringSlice(o.Object, ReleasedCDIFeatureGates, "spec", "config", "featureGates")
	case "RoleBinding":
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
	return true, nil
}

// writeCDIConfig does what the operator does with the CR's configuration:
// it copies it into CDIConfig, which cdi-controller reads.
func (e *Env) writeCDIConfig(ctx context.Context) error {
	config := &cdiv1.CDIConfig{ObjectMeta: metav1.ObjectMeta{Name: "config"},
		Spec: cdiv1.CDIConfigSpec{FeatureGates: ReleasedCDIFeatureGates}}
	if err := e.Client.Create(ctx, config); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating CDIConfig: %w", err)
	}
	return nil
}

// cdiControllerFlags gives cdi-controller the token keys cdi-apiserver
// made and the upload signers, as the operator mounts them into its pod.
func (e *Env) cdiControllerFlags(ctx context.Context, dir string, _ *keyPair) ([]string, error) {
	keyDir, err := e.writeCDITokenKeys(ctx, dir)
	if err != nil {
		return nil, err
	}
	signers := map[string]string{}
	for _, name := range []string{"cdi-uploadserver-signer", "cdi-uploadserver-client-signer"} {
		if signers[name], err = e.cdiSigner(ctx, dir, name); err != nil {
			return nil, err
		}
	}
	return []string{
		"--namespace", CDINamespace, "--token-key-dir", keyDir,
		"--uploadserver-signer-dir", signers["cdi-uploadserver-signer"],
		"--uploadserver-client-signer-dir", signers["cdi-uploadserver-client-signer"], "-v", "2",
	}, nil
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

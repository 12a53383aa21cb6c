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
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// CertManagerNamespace is where cert-manager keeps the Secrets of
// ClusterIssuers, as its Helm chart installs it.
const CertManagerNamespace = "cert-manager"

// StartCertManager installs cert-manager's CRDs, from the module the
// hack/tools/certmanager module pins, and starts its controller and CA
// injector (bin/cert-manager) against the API server, like the scheduler:
// Certificates are issued and CAs injected into webhook configurations and
// CRDs for real. The webhook of cert-manager is not run; the API server
// validates its objects by their CRD schemas only.
func (e *Env) StartCertManager() error {
	bin := BinDir()
	if err := checkBinaries(bin, "cert-manager"); err != nil {
		return fmt.Errorf("%w (make tools builds it)", err)
	}
	dir, err := toolModuleDir("certmanager", "github.com/cert-manager/cert-manager")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "deploy", "crds")}, ErrorIfPathMissing: true, MaxTime: CRDWait,
	}); err != nil {
		return fmt.Errorf("installing cert-manager's CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CertManagerNamespace}}
	if err := e.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	kubeconfig, err := e.componentsKubeconfig()
	if err != nil {
		return err
	}
	if err := e.startProcess(bin, "cert-manager", "cert-manager-controller", []string{"controller",
		"--kubeconfig=" + kubeconfig, "--namespace-for-cluster-resources=" + CertManagerNamespace, "--v=1"}); err != nil {
		return err
	}
	return e.startProcess(bin, "cert-manager", "cert-manager-cainjector", []string{"cainjector", "--kubeconfig=" + kubeconfig, "--v=1"})
}

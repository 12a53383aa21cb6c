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

package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// The service account the shipped reader RBAC binds: kube-prometheus's.
const (
	scraperNamespace = "monitoring"
	scraperName      = "prometheus-k8s"
)

// ProviderNamespace is where config/prometheus installs (its
// kustomization's namespace, as clusterctl installs the provider).
const ProviderNamespace = "capkv-system"

// ScraperToken creates the service account of kube-prometheus and the
// shipped reader RBAC (config/prometheus/rbac.yaml) on the management
// cluster, as an operator installs them, and returns a token of that
// account: what Prometheus sends to the provider's metrics endpoint, which
// checks it with a TokenReview and a SubjectAccessReview.
func ScraperToken(ctx context.Context, cfg *rest.Config) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scraperNamespace}}
	providerNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProviderNamespace}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: scraperNamespace, Name: scraperName}}
	for _, o := range []client.Object{ns, providerNS, sa} {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return "", err
		}
	}
	rbac, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rbac.yaml"))
	if err != nil {
		return "", err
	}
	// kustomize gives the namespaced objects the kustomization's
	// namespace; the test applies the file itself, so it does the same.
	err = world.ApplyYAMLWith(ctx, c, rbac, func(u *unstructured.Unstructured) error {
		if u.GetKind() == "Role" || u.GetKind() == "RoleBinding" {
			u.SetNamespace(ProviderNamespace)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
		if err == nil {
			return world.ErrSkipObject
		}
		return client.IgnoreNotFound(err)
	})
	if err != nil {
		return "", fmt.Errorf("applying config/prometheus/rbac.yaml: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(scraperNamespace).CreateToken(ctx, scraperName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of %s/%s: %w", scraperNamespace, scraperName, err)
	}
	return tr.Status.Token, nil
}

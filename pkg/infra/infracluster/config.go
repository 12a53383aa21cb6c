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
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
)

// Target is where objects for a tenant go on the infra cluster.
type Target struct {
	// Config reaches the infra cluster's API server.
	Config *rest.Config
	// Namespace is the namespace on the infra cluster.
	Namespace string
	// External is true when the infra cluster is not the management cluster.
	External bool
	// Hash identifies the kubeconfig, to notice when it changes.
	Hash [32]byte
	// Secret is the kubeconfig Secret of an external cluster.
	Secret types.NamespacedName
	// movable is false when the Secret is in the object's namespace and
	// lacks clusterctl's move label.
	movable bool
	secret  *corev1.Secret
}

// Resolve finds the infra cluster for an object in namespace ns. A Secret in
// another namespace is used only if secretNamespaces is empty or lists it. A nil ref
// means the management cluster, reached with local, and the object's own
// namespace. Otherwise the referenced Secret (in ns unless the reference names
// a namespace) must hold a kubeconfig under "kubeconfig"; its optional key
// "namespace" names the infra namespace, else ns is used. The Secret's content
// is never logged or put into errors.
func Resolve(ctx context.Context, reader client.Reader, local *rest.Config, ref *corev1.ObjectReference, ns string, secretNamespaces []string) (*Target, error) {
	if ref == nil {
		return &Target{Config: local, Namespace: ns}, nil
	}
	key := types.NamespacedName{Namespace: ns, Name: ref.Name}
	if ref.Namespace != "" && ref.Namespace != ns {
		// The community provider allows a central Secret; an allowlist keeps
		// one tenant from naming another's credentials.
		if len(secretNamespaces) > 0 && !slices.Contains(secretNamespaces, ref.Namespace) {
			return nil, configError(fmt.Errorf("infra cluster Secret %s/%s is in another namespace than the object naming it, and the manager allows that only for %s",
				ref.Namespace, ref.Name, strings.Join(secretNamespaces, ", ")))
		}
		key.Namespace = ref.Namespace
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		err = fmt.Errorf("reading infra cluster Secret %s: %w", key, err)
		if apierrors.IsNotFound(err) {
			return nil, configError(err)
		}
		return nil, err
	}
	kubeconfig, ok := secret.Data[infrav1.InfraClusterSecretKubeconfigKey]
	if !ok || len(kubeconfig) == 0 {
		return nil, configError(fmt.Errorf("infra cluster Secret %s has no %q key", key, infrav1.InfraClusterSecretKubeconfigKey))
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, configError(fmt.Errorf("infra cluster Secret %s: key %q: %w", key, infrav1.InfraClusterSecretKubeconfigKey, err))
	}
	target := &Target{Config: cfg, Namespace: ns, External: true, Hash: sha256.Sum256(kubeconfig), Secret: key,
		movable: key.Namespace != ns || movable.Labelled(secret), secret: secret}
	if infraNS := string(secret.Data[infrav1.InfraClusterSecretNamespaceKey]); infraNS != "" {
		target.Namespace = infraNS
	}
	return target, nil
}

// externalTimeout bounds every request to an external infra cluster, so an
// unreachable one fails fast instead of holding workers.
const externalTimeout = 15 * time.Second

// restConfig builds a client configuration from a kubeconfig that must be
// self-contained. Kubeconfigs come from Secrets tenants may write, so
// anything that would make the provider run a command or read its own files
// (its service account token, for one) is refused.
func restConfig(kubeconfig []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// The parse error can quote the content; report only that it failed.
		return nil, errors.New("not a valid kubeconfig")
	}
	for name, auth := range raw.AuthInfos {
		switch {
		case auth.Exec != nil, auth.AuthProvider != nil:
			return nil, fmt.Errorf("user %q runs a credential plugin; only inline credentials are allowed", name)
		case auth.TokenFile != "", auth.ClientCertificate != "", auth.ClientKey != "":
			return nil, fmt.Errorf("user %q reads credentials from files; only inline credentials are allowed", name)
		}
	}
	for name, cluster := range raw.Clusters {
		if cluster.CertificateAuthority != "" {
			return nil, fmt.Errorf("cluster %q reads its CA from a file; use certificate-authority-data", name)
		}
		if err := httpsOnly(name, cluster.Server); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.New("not a usable kubeconfig: no current context, cluster or user")
	}
	cfg.Timeout = externalTimeout
	return cfg, nil
}

// errConfig marks errors that only a change of the Secret or of the object
// naming it can fix; both are watched, so there is no point retrying.
var errConfig = errors.New("infra cluster configuration")

type wrappedConfigError struct{ error }

func (e wrappedConfigError) Unwrap() []error { return []error{e.error, errConfig} }

func configError(err error) error { return wrappedConfigError{err} }

// IsConfigError reports whether err is a configuration problem of the infra
// cluster Secret (missing, incomplete, refused) rather than a transient one.
func IsConfigError(err error) bool { return errors.Is(err, errConfig) }

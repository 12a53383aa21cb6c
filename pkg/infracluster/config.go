package infracluster

import (
	"context"
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
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
}

// Resolve finds the infra cluster for an object in namespace ns. A nil ref
// means the management cluster, reached with local, and the object's own
// namespace. Otherwise the referenced Secret (in ns unless the reference names
// a namespace) must hold a kubeconfig under "kubeconfig"; its optional key
// "namespace" names the infra namespace, else ns is used. The Secret's content
// is never logged or put into errors.
func Resolve(ctx context.Context, reader client.Reader, local *rest.Config, ref *corev1.ObjectReference, ns string) (*Target, error) {
	if ref == nil {
		return &Target{Config: local, Namespace: ns}, nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = ns
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("reading infra cluster Secret %s: %w", key, err)
	}
	kubeconfig, ok := secret.Data[infrav1.InfraClusterSecretKubeconfigKey]
	if !ok || len(kubeconfig) == 0 {
		return nil, fmt.Errorf("infra cluster Secret %s has no %q key", key, infrav1.InfraClusterSecretKubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		// The parse error can quote the content; report only that it failed.
		return nil, fmt.Errorf("infra cluster Secret %s: key %q is not a valid kubeconfig", key, infrav1.InfraClusterSecretKubeconfigKey)
	}
	target := &Target{Config: cfg, Namespace: ns, External: true, Hash: sha256.Sum256(kubeconfig)}
	if infraNS := string(secret.Data[infrav1.InfraClusterSecretNamespaceKey]); infraNS != "" {
		target.Namespace = infraNS
	}
	return target, nil
}

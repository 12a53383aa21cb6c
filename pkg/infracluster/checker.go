package infracluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Checker resolves the infra cluster of an object and checks its APIs.
type Checker struct {
	// Reader reads infra cluster Secrets; an uncached reader keeps every
	// Secret of the management cluster out of the manager's memory.
	Reader client.Reader
	// Local reaches the management cluster, the default infra cluster.
	Local *rest.Config
	// SecretNamespaces, when not empty, are the only namespaces besides an
	// object's own from which infra cluster Secrets are read.
	SecretNamespaces []string

	localDiscovery discovery.DiscoveryInterface
	// localAPIs remembers the management cluster's APIs until one of the
	// watched KubeVirt or CDI CustomResourceDefinitions changes, or for
	// apisRecheck at most.
	localAPIs *rememberedAPIs
}

// NewChecker returns a Checker for the management cluster at local.
func NewChecker(reader client.Reader, local *rest.Config) (*Checker, error) {
	d, err := discovery.NewDiscoveryClientForConfig(local)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	return &Checker{Reader: reader, Local: local, localDiscovery: d, localAPIs: &rememberedAPIs{discovery: d, ttl: apisRecheck}}, nil
}

// Check resolves the infra cluster named by ref (nil: the management cluster)
// for an object in namespace ns and reports whether it serves the KubeVirt and
// CDI APIs. A Secret that cannot be read or parsed is reported as
// InfraClusterUnreachable with the reason in the message.
func (c *Checker) Check(ctx context.Context, ref *corev1.ObjectReference, ns string) (*Target, APIStatus) {
	target, err := Resolve(ctx, c.Reader, c.Local, ref, ns, c.SecretNamespaces)
	if err != nil {
		return nil, APIStatus{Reason: infrav1.InfraClusterUnreachableReason, Message: err.Error()}
	}
	d := c.localDiscovery
	if target.External {
		if d, err = discovery.NewDiscoveryClientForConfig(target.Config); err != nil {
			return target, APIStatus{Reason: infrav1.InfraClusterUnreachableReason, Message: err.Error()}
		}
	}
	return target, CheckAPIs(d)
}

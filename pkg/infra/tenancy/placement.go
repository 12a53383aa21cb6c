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

package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Policy answers where an object may place what the provider creates for
// it, from the administrator's KubevirtClusterIdentities.
type Policy struct {
	// Reader reads KubevirtClusterIdentities, Namespaces and the
	// kubeconfig Secrets identities name, on the management cluster.
	Reader client.Reader
	// ProviderNamespace is where the provider runs: where an identity's
	// kubeconfig Secret is unless it names another namespace.
	ProviderNamespace string
}

// Source is how an object names its infra cluster: an identity, a
// kubeconfig Secret, or neither (the management cluster).
type Source struct {
	SecretRef *corev1.ObjectReference
	Identity  *infrav1.IdentityReference
	// Path is the spec the references are fields of, for refusals.
	Path *field.Path
}

// Request is an infra namespace an object names, and where it names it;
// empty asks for the default.
type Request struct {
	Namespace string
	Field     *field.Path
}

// Grant is what the policy lets one object use.
type Grant struct {
	// Identity is the identity that grants it; nil for the defaults.
	Identity *infrav1.KubevirtClusterIdentity
	// SecretRef is the kubeconfig Secret to use, its namespace set; nil
	// for the management cluster.
	SecretRef *corev1.ObjectReference
	// TenantCredentials is true when the kubeconfig is the tenant's own,
	// a Secret in the object's namespace: what it can do on its cluster is
	// bounded by the rights it carries, so any infra namespace goes.
	TenantCredentials bool
	// infraNamespaces are the identity's infra namespaces; empty allows
	// only the resolved one.
	infraNamespaces []string
}

// Guest is what the grant allows VMs beyond the defaults.
func (g *Grant) Guest() infrav1.GuestAllowances {
	if g == nil || g.Identity == nil {
		return infrav1.GuestAllowances{}
	}
	return g.Identity.Spec.Guest
}

// Namespace is the infra namespace for req: the one it names, else the
// identity's first, else resolved (the kubeconfig Secret's "namespace" key,
// else the object's own namespace). A namespace the grant does not allow is
// refused.
func (g *Grant) Namespace(resolved string, req Request) (string, error) {
	chosen := req.Namespace
	if chosen == "" {
		if len(g.infraNamespaces) > 0 {
			return g.infraNamespaces[0], nil
		}
		return resolved, nil
	}
	allowed := []string{resolved}
	if len(g.infraNamespaces) > 0 {
		allowed = g.infraNamespaces
	}
	if g.TenantCredentials || slices.Contains(allowed, chosen) {
		return chosen, nil
	}
	by := "without a KubevirtClusterIdentity, what the provider creates stays in the object's own namespace"
	if g.Identity != nil {
		by = fmt.Sprintf("KubevirtClusterIdentity %s allows", g.Identity.Name)
	}
	return "", refuse(RuleInfraNamespace, req.Field, "infra namespace %q is not allowed: %s %s",
		chosen, by, strings.Join(allowed, ", "))
}

// Decide finds what an object in namespace ns may use through src. A
// *Refusal says the policy does not allow it; other errors are transient.
func (p *Policy) Decide(ctx context.Context, ns string, src Source) (*Grant, error) {
	path := src.Path
	if path == nil {
		path = field.NewPath("spec")
	}
	switch {
	case src.Identity != nil && src.SecretRef != nil:
		return nil, refuse(RuleIdentityWithSecretRef, path.Child("identityRef"),
			"cannot be combined with infraClusterSecretRef: the identity names the infra cluster")
	case src.Identity != nil:
		return p.byIdentity(ctx, ns, src.Identity.Name, path.Child("identityRef"))
	case src.SecretRef == nil:
		return &Grant{}, nil
	}
	ref := src.SecretRef.DeepCopy()
	if ref.Namespace == "" || ref.Namespace == ns {
		ref.Namespace = ns
		return &Grant{SecretRef: ref, TenantCredentials: true}, nil
	}
	identity, err := p.identityForSecret(ctx, ns, ref)
	if err != nil {
		return nil, err
	}
	if identity == nil {
		return nil, refuse(RuleSecretNamespace, path.Child("infraClusterSecretRef", "namespace"),
			"kubeconfig Secret %s/%s is in another namespace and no KubevirtClusterIdentity grants it to namespace %s: an administrator allows it with one whose spec.secretRef names it and whose spec.allowedNamespaces include %q",
			ref.Namespace, ref.Name, ns, ns)
	}
	return grantOf(identity, p.ProviderNamespace), nil
}

func (p *Policy) byIdentity(ctx context.Context, ns, name string, fld *field.Path) (*Grant, error) {
	if p.Reader == nil {
		return nil, errors.New("the multi-tenancy policy has no reader for KubevirtClusterIdentities")
	}
	identity := &infrav1.KubevirtClusterIdentity{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Name: name}, identity); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refuse(RuleIdentityNotFound, fld.Child("name"), "KubevirtClusterIdentity %q does not exist; an administrator creates it", name)
		}
		return nil, fmt.Errorf("reading KubevirtClusterIdentity %s: %w", name, err)
	}
	ok, err := p.allows(ctx, identity, ns)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(RuleIdentityNamespace, fld.Child("name"),
			"KubevirtClusterIdentity %q does not allow namespace %s: it is granted by its spec.allowedNamespaces", name, ns)
	}
	return grantOf(identity, p.ProviderNamespace), nil
}

func grantOf(identity *infrav1.KubevirtClusterIdentity, providerNamespace string) *Grant {
	g := &Grant{Identity: identity, infraNamespaces: identity.Spec.InfraNamespaces}
	if ref := identity.Spec.SecretRef; ref != nil {
		g.SecretRef = &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: secretNamespace(ref, providerNamespace), Name: ref.Name}
	}
	return g
}

func secretNamespace(ref *infrav1.IdentitySecretReference, providerNamespace string) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return providerNamespace
}

// identityForSecret finds the first identity, by name, that grants the
// kubeconfig Secret ref to namespace ns; nil when none does.
func (p *Policy) identityForSecret(ctx context.Context, ns string, ref *corev1.ObjectReference) (*infrav1.KubevirtClusterIdentity, error) {
	if p.Reader == nil {
		return nil, errors.New("the multi-tenancy policy has no reader for KubevirtClusterIdentities")
	}
	list := &infrav1.KubevirtClusterIdentityList{}
	if err := p.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing KubevirtClusterIdentities: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b infrav1.KubevirtClusterIdentity) int { return strings.Compare(a.Name, b.Name) })
	for i := range list.Items {
		identity := &list.Items[i]
		s := identity.Spec.SecretRef
		if s == nil || s.Name != ref.Name || secretNamespace(s, p.ProviderNamespace) != ref.Namespace {
			continue
		}
		ok, err := p.allows(ctx, identity, ns)
		if err != nil {
			return nil, err
		}
		if ok {
			return identity, nil
		}
	}
	return nil, nil
}

// allows reports whether the identity's allowedNamespaces take ns: unset
// takes none, {} every one, else those listed and those the selector
// matches.
func (p *Policy) allows(ctx context.Context, identity *infrav1.KubevirtClusterIdentity, ns string) (bool, error) {
	a := identity.Spec.AllowedNamespaces
	switch {
	case a == nil:
		return false, nil
	case len(a.List) == 0 && a.Selector == nil:
		return true, nil
	case slices.Contains(a.List, ns):
		return true, nil
	case a.Selector == nil:
		return false, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(a.Selector)
	if err != nil {
		// The CRD cannot check a selector's operators; a broken one grants
		// nothing.
		return false, nil //nolint:nilerr // a broken selector allows nothing
	}
	namespace := &metav1.PartialObjectMetadata{}
	namespace.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := p.Reader.Get(ctx, types.NamespacedName{Name: ns}, namespace); err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	return selector.Matches(labels.Set(namespace.Labels)), nil
}

// ResolvedNamespace is the infra namespace an object gets by default from
// the grant's kubeconfig Secret (its "namespace" key), else ns; admission
// asks it, where the controllers have resolved the Secret already.
func (p *Policy) ResolvedNamespace(ctx context.Context, g *Grant, ns string) (string, error) {
	if g.SecretRef == nil || g.TenantCredentials || len(g.infraNamespaces) > 0 {
		return ns, nil
	}
	secret := &corev1.Secret{}
	err := p.Reader.Get(ctx, types.NamespacedName{Namespace: g.SecretRef.Namespace, Name: g.SecretRef.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return ns, nil
	case err != nil:
		return "", fmt.Errorf("reading kubeconfig Secret %s/%s: %w", g.SecretRef.Namespace, g.SecretRef.Name, err)
	}
	if key := string(secret.Data[infrav1.InfraClusterSecretNamespaceKey]); key != "" {
		return key, nil
	}
	return ns, nil
}

// IsRefusal reports whether err is a policy refusal.
func IsRefusal(err error) bool { return AsRefusal(err) != nil }

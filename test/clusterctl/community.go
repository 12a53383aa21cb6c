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

package clusterctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// The community KubeVirt provider's release the switch starts from, and
// what its installation is named (docs/kubevirt-behaviour.md, "What the
// community provider leaves behind": kustomize build config/default with
// namespace capk-system and name prefix capk-).
const (
	CommunityVersion   = "v0.11.2"
	CommunityNamespace = "capk-system"
	CommunityImage     = "quay.io/capk/capk-manager:" + CommunityVersion
)

// CommunityDeployment is the community provider's Deployment as its
// release installs it.
var CommunityDeployment = types.NamespacedName{Namespace: CommunityNamespace, Name: "capk-controller-manager"}

// communityKinds are the only CRDs the community release has.
var communityKinds = []string{"kubevirtclusters", "kubevirtclustertemplates", "kubevirtmachines", "kubevirtmachinetemplates"}

// AddCommunityRelease puts the community provider's release
// CommunityVersion into the repository under this provider's name
// (kubevirt), as a clusterctl.yaml whose kubevirt entry points at this
// provider's repository still lists it: its metadata.yaml (the 0.11 line,
// Cluster API contract v1beta2) and its components.
//
// Its module is not served here, so the components are written from what
// its config/default installs, not built from it: the namespace, the
// ServiceAccount, ClusterRole and binding, the leader-election Role and the
// Deployment, named as it names them, and its four CRDs with its labels.
// Three differences, all documented in docs/migrating-from-capk.md: the
// CRDs' schema is this provider's v1alpha1 (a superset of the
// community's, under the same group, version and kinds) but for the
// conditions, which take the community's form (communityStatus), and they
// carry the v1beta2 contract label; its two validating webhooks for
// templates are left out, as no community webhook server runs to answer
// them. Nothing runs the Deployment's pods: no image of the community
// provider exists in the world (world.CommunityProvider acts for it).
func (cc *Clusterctl) AddCommunityRelease() error {
	dir := filepath.Join(cc.Repository, ProviderLabel, CommunityVersion)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	metadata := "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n" +
		"- major: 0\n  minor: 10\n  contract: v1beta1\n- major: 0\n  minor: 11\n  contract: v1beta2\n"
	if err := os.WriteFile(filepath.Join(dir, "metadata.yaml"), []byte(metadata), 0o600); err != nil {
		return err
	}
	var components bytes.Buffer
	for _, kind := range communityKinds {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "infrastructure.cluster.x-k8s.io_"+kind+".yaml")) //nolint:gosec // the provider's own CRDs
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return err
		}
		// Its contract labels, up to Cluster API's v1beta1 contract, and
		// v1beta2's, which its release lacks: Cluster API v1.14, which the
		// world runs, converts a v1beta1 Cluster's references only to CRDs
		// that have it.
		crd.Labels = map[string]string{"cluster.x-k8s.io/provider": "kubevirt"}
		for _, contract := range []string{"v1alpha1", "v1alpha2", "v1alpha3", "v1alpha4", "v1beta1", "v1beta2"} {
			crd.Labels["cluster.x-k8s.io/"+contract] = "v1alpha1"
		}
		crd.Annotations = nil
		communityStatus(crd)
		if err := appendYAML(&components, crd); err != nil {
			return err
		}
	}
	for _, obj := range communityInstallation() {
		if err := appendYAML(&components, obj); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "infrastructure-components.yaml"), components.Bytes(), 0o600)
}

// InitCommunity installs the community release into m with clusterctl
// init, as a platform engineer did before the switch. It does not wait for
// the Deployment, whose pods never run.
func (cc *Clusterctl) InitCommunity(ctx context.Context, m Management) (string, error) {
	if err := RegisterInProcessProviders(ctx, m.Config, m.Client, cc.CAPIVersion); err != nil {
		return "", err
	}
	return cc.Run(ctx, "init", "--infrastructure", "kubevirt:"+CommunityVersion, "--kubeconfig", m.Kubeconfig)
}

// communityStatus gives the CRD's conditions the community provider's
// form: Cluster API v1beta1 conditions (a reason and message are optional,
// a severity is added).
func communityStatus(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		schema := crd.Spec.Versions[i].Schema
		if schema == nil || schema.OpenAPIV3Schema == nil {
			continue
		}
		status, ok := schema.OpenAPIV3Schema.Properties["status"]
		if !ok {
			continue
		}
		if _, ok := status.Properties["conditions"]; ok {
			str := apiextensionsv1.JSONSchemaProps{Type: "string"}
			status.Properties["conditions"] = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
				Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"lastTransitionTime", "status", "type"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"lastTransitionTime": {Type: "string", Format: "date-time"},
						"message":            str, "reason": str, "severity": str, "status": str, "type": str,
					}}}}
		}
		schema.OpenAPIV3Schema.Properties["status"] = status
	}
}

func communityInstallation() []any {
	ns := CommunityNamespace
	labels := map[string]string{"cluster.x-k8s.io/provider": "kubevirt", "control-plane": "controller-manager"}
	meta := func(kind, name string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Labels: map[string]string{"cluster.x-k8s.io/provider": "kubevirt"}}
		if kind != "cluster" {
			m.Namespace = ns
		}
		return m
	}
	typeMeta := func(apiVersion, kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
	}
	all := []string{"*"}
	return []any{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: meta("cluster", ns)},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta("", "capk-manager")},
		&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta("cluster", "capk-manager-role"),
			Rules: []rbacv1.PolicyRule{{APIGroups: all, Resources: all, Verbs: all}}},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta("cluster", "capk-manager-rolebinding"),
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "capk-manager-role"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "capk-manager", Namespace: ns}}},
		&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta("", "capk-leader-election-role"),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: all}}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta("", "capk-leader-election-rolebinding"),
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "capk-leader-election-role"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "capk-manager", Namespace: ns}}},
		&appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta("", CommunityDeployment.Name),
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{ServiceAccountName: "capk-manager", Containers: []corev1.Container{{
						Name: "manager", Image: CommunityImage, Command: []string{"/manager"},
						Args: []string{"--leader-elect"},
					}}},
				},
			}},
	}
}

func appendYAML(buf *bytes.Buffer, obj any) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	buf.WriteString("---\n")
	buf.Write(data)
	return nil
}

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

package adoption

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func communityLabels() map[string]string {
	return map[string]string{
		CommunityMachineNameLabel: "m-0", CommunityMachineNamespaceLabel: "tenant",
		infrav1.ClusterNameLabel: "c1", "kubevirt.io/vm": "m-0", "name": "m-0",
	}
}

func TestCommunityVM(t *testing.T) {
	m := Machine{Namespace: "tenant", Name: "m-0", Cluster: "c1"}
	for _, tc := range []struct {
		name   string
		mutate func(*metav1.ObjectMeta)
		want   bool
	}{
		{"the community provider's VM of the machine", nil, true},
		{"only the name is shared", func(o *metav1.ObjectMeta) { o.Labels = nil }, false},
		{"the labels name another machine", func(o *metav1.ObjectMeta) { o.Labels[CommunityMachineNameLabel] = "m-1" }, false},
		{"the labels name another namespace", func(o *metav1.ObjectMeta) { o.Labels[CommunityMachineNamespaceLabel] = "other" }, false},
		{"the labels name another cluster", func(o *metav1.ObjectMeta) { o.Labels[infrav1.ClusterNameLabel] = "c2" }, false},
		{"another machine of this provider owns it", func(o *metav1.ObjectMeta) {
			o.Annotations = map[string]string{infrav1.OwnerAnnotation: "tenant/m-1"}
		}, false},
		{"a pool of this provider owns it", func(o *metav1.ObjectMeta) {
			o.Annotations = map[string]string{infrav1.PoolOwnerAnnotation: "tenant/pool"}
		}, false},
		{"something owns it (the community provider sets no owner)", func(o *metav1.ObjectMeta) {
			o.OwnerReferences = []metav1.OwnerReference{{Kind: "VirtualMachinePool", Name: "pool", Controller: ptr.To(true)}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "tenant", Labels: communityLabels()}}
			if tc.mutate != nil {
				tc.mutate(&vm.ObjectMeta)
			}
			if got := CommunityVM(vm, m); got != tc.want {
				t.Errorf("CommunityVM = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMarkVMChangesMetadataOnly(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m-0", Labels: communityLabels()},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: communityLabels()},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Hostname: "m-0"},
		}},
	}
	spec := vm.Spec.Template.Spec.DeepCopy()
	owner := &metav1.OwnerReference{Kind: "KubevirtMachine", Name: "m-0", UID: "uid", Controller: ptr.To(true)}
	MarkVM(vm, Marks{Owner: "tenant/m-0", Controller: owner, Labels: map[string]string{
		infrav1.KubevirtMachineNamespaceLabel: "tenant", infrav1.ClusterNameLabel: "not-this"}})
	if vm.Annotations[infrav1.OwnerAnnotation] != "tenant/m-0" || !Adopted(vm) {
		t.Errorf("annotations %v", vm.Annotations)
	}
	if vm.Labels[infrav1.KubevirtMachineNamespaceLabel] != "tenant" || vm.Spec.Template.ObjectMeta.Labels[infrav1.KubevirtMachineNamespaceLabel] != "tenant" {
		t.Errorf("the identity label is missing: %v / %v", vm.Labels, vm.Spec.Template.ObjectMeta.Labels)
	}
	if vm.Labels[infrav1.ClusterNameLabel] != "not-this" || vm.Labels["name"] != "m-0" {
		t.Errorf("the identity labels replace the community provider's, and keep its others: %v", vm.Labels)
	}
	if len(vm.OwnerReferences) != 1 || vm.OwnerReferences[0].UID != "uid" {
		t.Errorf("owner references %v", vm.OwnerReferences)
	}
	MarkVM(vm, Marks{Owner: "tenant/m-0", Controller: owner})
	if len(vm.OwnerReferences) != 1 {
		t.Errorf("a second controller reference: %v", vm.OwnerReferences)
	}
	if vm.Spec.Template.Spec.Hostname != spec.Hostname {
		t.Errorf("the instance spec changed")
	}
}

func TestCommunityUserData(t *testing.T) {
	secret := func(mutate func(*metav1.ObjectMeta)) metav1.Object {
		o := &metav1.ObjectMeta{Name: "m-0-bootstrap-userdata", Labels: map[string]string{infrav1.ClusterNameLabel: "c1"}}
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	if !CommunityUserData(secret(nil), communitySecretType, "c1", "m-0-bootstrap") {
		t.Error("the community provider's user data Secret is not recognised")
	}
	for name, tc := range map[string]struct {
		obj metav1.Object
		typ corev1.SecretType
	}{
		"the cluster's kubeconfig": {secret(func(o *metav1.ObjectMeta) { o.Name = "c1-kubeconfig" }), communitySecretType},
		"an opaque Secret":         {secret(nil), corev1.SecretTypeOpaque},
		"another cluster's":        {secret(func(o *metav1.ObjectMeta) { o.Labels[infrav1.ClusterNameLabel] = "c2" }), communitySecretType},
		"one owned already":        {secret(func(o *metav1.ObjectMeta) { o.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }), communitySecretType},
		"one this provider marked": {secret(func(o *metav1.ObjectMeta) { o.Annotations = map[string]string{infrav1.OwnerAnnotation: "t/m"} }), communitySecretType},
	} {
		if CommunityUserData(tc.obj, tc.typ, "c1", "m-0-bootstrap") {
			t.Errorf("%s is taken for the community user data", name)
		}
	}
}

func TestCommunityInstance(t *testing.T) {
	if !CommunityInstance(&metav1.ObjectMeta{Labels: communityLabels()}) {
		t.Error("the community provider's instance is taken for the provider's")
	}
	labelled := communityLabels()
	labelled[infrav1.KubevirtMachineNamespaceLabel] = "tenant"
	if !CommunityInstance(&metav1.ObjectMeta{Labels: labelled, Annotations: map[string]string{AdoptedFromAnnotation: CommunityProvider}}) {
		t.Error("the community provider's instance, labelled and marked after the adoption, is taken for the provider's")
	}
	// The next instance carries the community labels the template kept,
	// and the provider's, but not the mark.
	next := communityLabels()
	next[infrav1.KubevirtMachineNamespaceLabel] = "tenant"
	if CommunityInstance(&metav1.ObjectMeta{Labels: next}) {
		t.Error("an instance from the adopted template is taken for the community provider's")
	}
}

func TestUserDataSecrets(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
			{Name: "root"},
			{Name: "cloudinitvolume", VolumeSource: kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{
				UserDataSecretRef: &corev1.LocalObjectReference{Name: "m-0-userdata"}}}},
			{Name: "other", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
				UserDataSecretRef: &corev1.LocalObjectReference{Name: "m-0-userdata"}}}},
		}},
	}}}
	if got := UserDataSecrets(vm); len(got) != 1 || got[0] != "m-0-userdata" {
		t.Errorf("UserDataSecrets = %v", got)
	}
}

func TestCommunityService(t *testing.T) {
	svc := func(mutate func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "c1-lb", Labels: map[string]string{infrav1.ClusterNameLabel: "c1"}},
			Spec:       corev1.ServiceSpec{Selector: CommunitySelector("c1")},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	if !CommunityService(svc(nil), "c1") {
		t.Error("the community provider's Service is not recognised")
	}
	for name, s := range map[string]*corev1.Service{
		"another cluster's":   svc(func(s *corev1.Service) { s.Labels[infrav1.ClusterNameLabel] = "c2" }),
		"another selector":    svc(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "db"} }),
		"a wider selector":    svc(func(s *corev1.Service) { s.Spec.Selector = map[string]string{infrav1.ClusterNameLabel: "c1"} }),
		"one owned already":   svc(func(s *corev1.Service) { s.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }),
		"this provider's own": svc(func(s *corev1.Service) { s.Annotations = map[string]string{infrav1.OwnerAnnotation: "t/c1"} }),
	} {
		if CommunityService(s, "c1") {
			t.Errorf("%s is taken for the community provider's Service", name)
		}
	}
}

func TestWithoutCommunityConditions(t *testing.T) {
	ours := metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"}
	for name, tc := range map[string]struct {
		in, want []metav1.Condition
	}{
		"none":                       {},
		"only ours":                  {in: []metav1.Condition{ours}, want: []metav1.Condition{ours}},
		"a v1beta1 Ready, no reason": {in: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}, ours}, want: []metav1.Condition{ours}},
		"a community type with a reason": {
			in:   []metav1.Condition{ours, {Type: "VMProvisioned", Status: metav1.ConditionFalse, Reason: "WaitingForBootstrapData"}},
			want: []metav1.Condition{ours},
		},
		"LoadBalancerAvailable": {in: []metav1.Condition{{Type: "LoadBalancerAvailable", Status: metav1.ConditionTrue}}, want: []metav1.Condition{}},
	} {
		got := WithoutCommunityConditions(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

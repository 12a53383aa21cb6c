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
	"cmp"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func vmWith(mutate func(*infrav1.KubevirtMachineSpec)) *infrav1.KubevirtMachineSpec {
	spec := &infrav1.KubevirtMachineSpec{}
	spec.VirtualMachineTemplate.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	mutate(spec)
	return spec
}

func volumes(vs ...kubevirtv1.VolumeSource) func(*infrav1.KubevirtMachineSpec) {
	return func(s *infrav1.KubevirtMachineSpec) {
		for i, v := range vs {
			s.VirtualMachineTemplate.Spec.Template.Spec.Volumes = append(s.VirtualMachineTemplate.Spec.Template.Spec.Volumes,
				kubevirtv1.Volume{Name: "v" + string(rune('a'+i)), VolumeSource: v})
		}
	}
}

func TestGuest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     *infrav1.KubevirtMachineSpec
		networks []infrav1.MultusNetwork
		allow    infrav1.GuestAllowances
		rule     string // the first refusal's rule; empty: none
		named    []string
		// vmNamespace is where the VM goes; empty: the tenant's own,
		// tenant-a.
		vmNamespace string
	}{
		{name: "nothing named", spec: vmWith(func(*infrav1.KubevirtMachineSpec) {})},
		{name: "service account token", spec: vmWith(volumes(kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "default"}})),
			rule: RuleGuestVolumeSource},
		{name: "service account allowed", spec: vmWith(volumes(kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "default"}})),
			allow: infrav1.GuestAllowances{VolumeSources: []string{infrav1.GuestVolumeServiceAccount}}},
		{name: "host disk", spec: vmWith(volumes(kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/etc/shadow"}})), rule: RuleGuestVolumeSource},
		{name: "downward metrics", spec: vmWith(volumes(kubevirtv1.VolumeSource{DownwardMetrics: &kubevirtv1.DownwardMetricsVolumeSource{}})), rule: RuleGuestVolumeSource},
		{name: "secret, config map and claims are named", spec: vmWith(volumes(
			kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s"}},
			kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}},
			kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}}},
			kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "evil.example/disk", ImagePullSecret: "pull"}},
		)), named: []string{"Secret s", "ConfigMap cm", "PersistentVolumeClaim pvc", "Secret ud", "Secret pull"}},
		{name: "a DRA claim named outright is named; one from a template is the VM's own", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.Spec.ResourceClaims = []kubevirtv1.VirtualMachineInstanceResourceClaim{
				{Name: "shared", ResourceClaimName: ptr.To("victim-gpu")},
				{Name: "own", ResourceClaimTemplateName: ptr.To("one-gpu")},
			}
		}), named: []string{"ResourceClaim victim-gpu"}},
		{name: "in a shared namespace, a DRA claim template is named too", vmNamespace: "shared", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.Spec.ResourceClaims = []kubevirtv1.VirtualMachineInstanceResourceClaim{
				{Name: "own", ResourceClaimTemplateName: ptr.To("one-gpu")},
			}
		}), named: []string{"ResourceClaimTemplate one-gpu"}},
		{name: "unlabelled objects allowed", spec: vmWith(volumes(kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s"}})),
			allow: infrav1.GuestAllowances{UnlabelledObjects: true}},
		{name: "own data volume template is not named", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates[0].Name = "own"
			volumes(kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "own"}}, kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "other"}})(s)
		}), named: []string{"DataVolume other"}},
		{name: "clone from another namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "tenant-b", Name: "disk"}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestCloneSource},
		{name: "clone from a data source of another namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: ptr.To("tenant-b"), Name: "img"}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestCloneSource},
		{name: "clone from its own namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "tenant-a", Name: "disk"}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		})},
		{name: "golden-image label on a DataVolume template", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{}
			dv.Labels = map[string]string{"capkv.io/golden-image": "true"}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestReservedKey},
		{name: "pool label on the VM", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{infrav1.KubevirtMachinePoolLabel: "victim"}
		}), rule: RuleGuestReservedKey},
		{name: "owner annotation on the instance", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.OwnerAnnotation: "tenant-b/m"}
		}), rule: RuleGuestReservedKey},
		{name: "other capkv.io subdomains pass", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"cni.capkv.io/name": "flannel"}
		})},
		{name: "import credentials are named", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{HTTP: &infrav1.HTTPImageSource{URL: "https://x", SecretRef: "creds", CertConfigMap: "ca"}}}
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{
				HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://x", SecretRef: "dv-creds", SecretExtraHeaders: []string{"hdr"}}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), named: []string{"Secret creds", "ConfigMap ca", "Secret dv-creds", "Secret hdr"}},
		{name: "vddk init image", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{
				VDDK: &cdiv1.DataVolumeSourceVDDK{InitImageURL: "evil/image"}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestImportImage},
		{name: "Multus annotation on a DataVolume template", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{}
			dv.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "kube-system/host"}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestAnnotation},
		{name: "a claim cloned through storage.dataSourceRef", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{
				DataSourceRef: &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "victim-root"}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestCloneSource},
		{name: "a registry node pull", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			dv := kubevirtv1.DataVolumeTemplateSpec{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{
				Registry: &cdiv1.DataVolumeSourceRegistry{URL: ptr.To("docker://private/image"), PullMethod: ptr.To(cdiv1.RegistryPullNode)}}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{dv}
		}), rule: RuleGuestImportImage},
		{name: "clones in a shared namespace are named", vmNamespace: "shared", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{PVC: &infrav1.ImageVolumeRef{Name: "seed"}}}
			s.VirtualMachineTemplate.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{
				{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: "victim-root"}}}},
				{Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "img"}}},
				{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Namespace: "shared", Name: "snap"}}}},
			}
		}), named: []string{"PersistentVolumeClaim seed", "PersistentVolumeClaim victim-root", "DataSource img", "VolumeSnapshot snap"}},
		{name: "clones in its own namespace are its administrator's images", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.RootDisk = &infrav1.RootDiskSpec{Image: infrav1.ImageSource{DataSource: &infrav1.ImageVolumeRef{Name: "ubuntu"}}}
		})},
		{name: "hook sidecar annotation", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.ObjectMeta.Annotations = map[string]string{"hooks.kubevirt.io/hookSidecars": `[{"image":"evil"}]`}
		}), rule: RuleGuestAnnotation},
		{name: "multus annotation on the VM", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.ObjectMeta.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "tenant-b/vlan"}
		}), rule: RuleGuestAnnotation},
		{name: "annotation an administrator allows", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.ObjectMeta.Annotations = map[string]string{"hooks.kubevirt.io/hookSidecars": "[]"}
		}), allow: infrav1.GuestAllowances{Annotations: []string{"hooks.kubevirt.io/hookSidecars"}}},
		{name: "other annotations pass", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/team": "a"}
		})},
		{name: "VM network in another namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.VirtualMachineTemplate.Spec.Template.Spec.Networks = []kubevirtv1.Network{{Name: "n", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "tenant-b/vlan"}}}}
		}), rule: RuleGuestNetworkNamespace},
		{name: "machine network in another namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.Networks = []infrav1.MultusNetwork{{Name: "n", NetworkAttachmentDefinition: "tenant-b/vlan"}}
		}), rule: RuleGuestNetworkNamespace},
		{name: "machine network in an allowed namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.Networks = []infrav1.MultusNetwork{{Name: "n", NetworkAttachmentDefinition: "shared/vlan"}}
		}), allow: infrav1.GuestAllowances{NetworkNamespaces: []string{"shared"}}},
		{name: "cluster network in another namespace", spec: vmWith(func(*infrav1.KubevirtMachineSpec) {}),
			networks: []infrav1.MultusNetwork{{Name: "n", NetworkAttachmentDefinition: "tenant-b/vlan"}}, rule: RuleGuestNetworkNamespace},
		{name: "networks of its own namespace", spec: vmWith(func(s *infrav1.KubevirtMachineSpec) {
			s.Networks = []infrav1.MultusNetwork{{Name: "a", NetworkAttachmentDefinition: "vlan"}, {Name: "b", NetworkAttachmentDefinition: "tenant-a/vlan"}}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmNamespace := cmp.Or(tc.vmNamespace, "tenant-a")
			rs, named := Guest(tc.spec, tc.networks, vmNamespace, Shared(vmNamespace, "tenant-a", false, ""), tc.allow, field.NewPath("spec"))
			switch {
			case tc.rule == "" && len(rs) > 0:
				t.Fatalf("refused: %v", rs[0])
			case tc.rule != "" && len(rs) == 0:
				t.Fatalf("not refused, want rule %s", tc.rule)
			case tc.rule != "" && rs[0].Rule != tc.rule:
				t.Fatalf("refused by %s, want %s: %v", rs[0].Rule, tc.rule, rs[0])
			case tc.rule != "" && !strings.Contains(rs[0].Error(), tc.rule):
				t.Fatalf("message does not name the rule: %v", rs[0])
			}
			var got []string
			for _, n := range named {
				got = append(got, n.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.named, ",") {
				t.Fatalf("named %v, want %v", got, tc.named)
			}
		})
	}
}

func TestShared(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vmNS     string
		external bool
		secretNS string
		want     bool
	}{
		{name: "its own namespace on the management cluster", vmNS: "tenant-a"},
		{name: "another namespace on the management cluster", vmNS: "vms", want: true},
		{name: "an administrator's external infra cluster, even a namespace of its name", vmNS: "tenant-a", external: true, secretNS: "capkv-system", want: true},
		{name: "the tenant's own external infra cluster", vmNS: "vms", external: true, secretNS: "tenant-a"},
	} {
		if got := Shared(tc.vmNS, "tenant-a", tc.external, tc.secretNS); got != tc.want {
			t.Errorf("%s: Shared = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTenantCloud(t *testing.T) {
	on := infrav1.TenantCloudSpec{Components: []infrav1.TenantCloudComponent{infrav1.TenantCloudControllerManager}}
	fld := field.NewPath("spec", "tenantCloud", "components")
	none := infrav1.GuestAllowances{}
	if r := TenantCloud(on, true, none, "shared", fld); r == nil || r.Rule != RuleTenantCloudShared || !strings.Contains(r.Error(), "shared") {
		t.Errorf("a credential in a shared namespace: %v", r)
	}
	if r := TenantCloud(on, true, infrav1.GuestAllowances{TenantCloud: true}, "team-a-vms", fld); r != nil {
		t.Errorf("a credential an identity allows refused: %v", r)
	}
	if r := TenantCloud(on, false, none, "tenant-a", fld); r != nil {
		t.Errorf("a credential in the tenant's own namespace refused: %v", r)
	}
	if r := TenantCloud(infrav1.TenantCloudSpec{}, true, none, "shared", fld); r != nil {
		t.Errorf("no credential asked for, refused: %v", r)
	}
}

func TestDecideWithoutIdentity(t *testing.T) {
	p := &Policy{ProviderNamespace: "capkv-system"}
	own := Request{Field: field.NewPath("spec", "x")}
	for _, tc := range []struct {
		name    string
		src     Source
		want    Request
		ns      string // the infra namespace granted; empty: refused
		rule    string
		anyNS   bool
		secretN string
	}{
		{name: "defaults: own namespace", ns: "tenant-a", want: own},
		{name: "own namespace named", want: Request{Namespace: "tenant-a", Field: own.Field}, ns: "tenant-a"},
		{name: "another namespace", want: Request{Namespace: "tenant-b", Field: own.Field}, rule: RuleInfraNamespace},
		{name: "kube-system", want: Request{Namespace: "kube-system", Field: own.Field}, rule: RuleInfraNamespace},
		{name: "own Secret: its namespace key or any", src: Source{SecretRef: &corev1.ObjectReference{Name: "kc"}},
			want: Request{Namespace: "vms", Field: own.Field}, ns: "vms", secretN: "tenant-a/kc"},
		{name: "identity and Secret", src: Source{SecretRef: &corev1.ObjectReference{Name: "kc"}, Identity: &infrav1.IdentityReference{Name: "i"}}, rule: RuleIdentityWithSecretRef},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := p.Decide(context.Background(), "tenant-a", tc.src)
			var ns string
			if err == nil {
				ns, err = g.Namespace("tenant-a", tc.want)
				if g.SecretRef != nil && g.SecretRef.Namespace+"/"+g.SecretRef.Name != tc.secretN {
					t.Fatalf("Secret %s/%s, want %s", g.SecretRef.Namespace, g.SecretRef.Name, tc.secretN)
				}
			}
			if tc.rule != "" {
				if r := AsRefusal(err); r == nil || r.Rule != tc.rule {
					t.Fatalf("got %v, want a refusal by %s", err, tc.rule)
				}
				return
			}
			if err != nil || ns != tc.ns {
				t.Fatalf("got %q, %v; want %q", ns, err, tc.ns)
			}
		})
	}
}

func TestGrantNamespaceOfIdentity(t *testing.T) {
	identity := &infrav1.KubevirtClusterIdentity{Spec: infrav1.KubevirtClusterIdentitySpec{InfraNamespaces: []string{"vms-a", "vms-shared"}}}
	identity.Name = "team-a"
	g := grantOf(identity, "capkv-system")
	fld := field.NewPath("spec", "virtualMachineTemplate", "metadata", "namespace")
	if ns, err := g.Namespace("tenant-a", Request{Field: fld}); err != nil || ns != "vms-a" {
		t.Fatalf("default: %q, %v; want the first infra namespace", ns, err)
	}
	if ns, err := g.Namespace("tenant-a", Request{Namespace: "vms-shared", Field: fld}); err != nil || ns != "vms-shared" {
		t.Fatalf("listed: %q, %v", ns, err)
	}
	_, err := g.Namespace("tenant-a", Request{Namespace: "tenant-a", Field: fld})
	if r := AsRefusal(err); r == nil || r.Rule != RuleInfraNamespace || !strings.Contains(r.Error(), "team-a") || !strings.Contains(r.Error(), fld.String()) {
		t.Fatalf("unlisted namespace: %v", err)
	}
}

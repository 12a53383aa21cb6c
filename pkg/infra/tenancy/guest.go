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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// deniedAnnotationPrefixes are annotation keys on a VM or its instance
// template that KubeVirt, Multus, a CNI or the kubelet act on for the VM's
// launcher pod: a hook sidecar runs any image there
// (hooks.kubevirt.io/hookSidecars), Multus attaches networks of any
// namespace (k8s.v1.cni.cncf.io/networks) or replaces the default one,
// CNIs pin addresses, and the pod's confinement can be loosened.
var deniedAnnotationPrefixes = []string{
	"hooks.kubevirt.io/",
	"k8s.v1.cni.cncf.io/",
	"v1.multus-cni.io/",
	"cni.projectcalico.org/",
	"ovn.kubernetes.io/",
	"k8s.ovn.org/",
	"container.apparmor.security.beta.kubernetes.io/",
	"seccomp.security.alpha.kubernetes.io/",
}

// Object kinds a VM may name and that must belong to its cluster.
const (
	KindSecret     = "Secret"
	KindConfigMap  = "ConfigMap"
	KindClaim      = "PersistentVolumeClaim"
	KindDataVolume = "DataVolume"
	// KindResourceClaim is a DRA claim a VM names to share its devices;
	// one it makes from a ResourceClaimTemplate is its own.
	KindResourceClaim = "ResourceClaim"
	// KindResourceClaimTemplate is what a VM's own DRA claim is made
	// from; in a shared namespace it must be its cluster's too, as it says
	// which devices and with what access.
	KindResourceClaimTemplate = "ResourceClaimTemplate"
)

// Named is an infra object a VM names in its namespace: it must carry the
// cluster's name label, unless the grant allows unlabelled objects.
type Named struct {
	Kind, Name string
	Field      *field.Path
}

// Guest checks what a machine's VM may mount, attach and carry: the spec
// a tenant wrote, the cluster's networks, the namespace the VM goes to,
// whether that namespace may hold others' objects (Shared) and what the
// grant allows beyond the defaults. It returns the refusals and the
// objects that must be checked for the cluster's label on the infra
// cluster (CheckOwned), with the VM's own DataVolume templates left out:
// they are created with it.
func Guest(spec *infrav1.KubevirtMachineSpec, clusterNetworks []infrav1.MultusNetwork, vmNamespace string, shared bool,
	allow infrav1.GuestAllowances, fld *field.Path) (Refusals, []Named) {
	vmt := fld.Child("virtualMachineTemplate")
	rs, named := rootDiskImport(spec.RootDisk, fld.Child("rootDisk"))
	rs = append(rs, templateKeys(&spec.VirtualMachineTemplate, vmt)...)
	if shared {
		named = append(named, sharedCloneSources(spec, vmNamespace, fld)...)
	}
	rs = append(rs, annotations(spec.VirtualMachineTemplate.ObjectMeta.Annotations, allow, vmt.Child("metadata", "annotations"))...)
	networkAllowed := append([]string{vmNamespace}, allow.NetworkNamespaces...)
	for i, n := range spec.Networks {
		rs = append(rs, Network(n.NetworkAttachmentDefinition, networkAllowed, fld.Child("networks").Index(i).Child("networkAttachmentDefinition"))...)
	}
	for _, n := range clusterNetworks {
		rs = append(rs, Network(n.NetworkAttachmentDefinition, networkAllowed, field.NewPath("KubevirtCluster", "spec", "network", "networks").Key(n.Name))...)
	}
	vm := &spec.VirtualMachineTemplate.Spec
	own := map[string]bool{}
	for i, t := range vm.DataVolumeTemplates {
		own[t.Name] = true
		p := vmt.Child("spec", "dataVolumeTemplates").Index(i)
		// CDI copies a DataVolume's annotations onto its claim and from
		// there onto the importer's and cloner's pods, Multus's among them.
		rs = append(rs, annotations(t.Annotations, allow, p.Child("metadata", "annotations"))...)
		rs = append(rs, cloneSource(t, vmNamespace, p)...)
		rs = append(rs, claimDataSource(t, p.Child("spec"))...)
		r, n := importObjects(t.Spec.Source, p.Child("spec", "source"))
		rs = append(rs, r...)
		named = append(named, n...)
	}
	if vm.Template == nil {
		return rs, withoutAllowed(named, allow)
	}
	vmi := vmt.Child("spec", "template")
	rs = append(rs, annotations(vm.Template.ObjectMeta.Annotations, allow, vmi.Child("metadata", "annotations"))...)
	for i, n := range vm.Template.Spec.Networks {
		if n.Multus != nil {
			rs = append(rs, Network(n.Multus.NetworkName, networkAllowed, vmi.Child("spec", "networks").Index(i).Child("multus", "networkName"))...)
		}
	}
	for i, v := range vm.Template.Spec.Volumes {
		p := vmi.Child("spec", "volumes").Index(i)
		r, n := volume(v, allow, own, p)
		rs = append(rs, r...)
		named = append(named, n...)
	}
	// A claim named outright is shared with every pod naming it: its
	// devices are another cluster's unless the claim is this one's.
	for i, c := range vm.Template.Spec.ResourceClaims {
		p := vmi.Child("spec", "resourceClaims").Index(i)
		if c.ResourceClaimName != nil {
			named = append(named, Named{KindResourceClaim, *c.ResourceClaimName, p.Child("resourceClaimName")})
		}
		if c.ResourceClaimTemplateName != nil && shared {
			named = append(named, Named{KindResourceClaimTemplate, *c.ResourceClaimTemplateName, p.Child("resourceClaimTemplateName")})
		}
	}
	for i, c := range vm.Template.Spec.AccessCredentials {
		p := vmi.Child("spec", "accessCredentials").Index(i)
		if s := c.SSHPublicKey; s != nil && s.Source.Secret != nil {
			named = append(named, Named{KindSecret, s.Source.Secret.SecretName, p.Child("sshPublicKey", "source", "secret", "secretName")})
		}
		if u := c.UserPassword; u != nil && u.Source.Secret != nil {
			named = append(named, Named{KindSecret, u.Source.Secret.SecretName, p.Child("userPassword", "source", "secret", "secretName")})
		}
	}
	return rs, withoutAllowed(named, allow)
}

// withoutAllowed is named, or nothing when the grant allows unlabelled
// objects.
func withoutAllowed(named []Named, allow infrav1.GuestAllowances) []Named {
	if allow.UnlabelledObjects {
		return nil
	}
	return named
}

// volume checks one volume's source: the kinds refused unless allowed, and
// the objects it names.
func volume(v kubevirtv1.Volume, allow infrav1.GuestAllowances, own map[string]bool, p *field.Path) (Refusals, []Named) {
	kind := func(name string) Refusals {
		if slices.Contains(allow.VolumeSources, name) {
			return nil
		}
		return Refusals{refuse(RuleGuestVolumeSource, p.Child(name),
			"a %s volume reaches beyond the VM (infra credentials or the infra node); an administrator allows it in a KubevirtClusterIdentity's spec.guest.volumeSources", name)}
	}
	switch {
	case v.ServiceAccount != nil:
		return kind(infrav1.GuestVolumeServiceAccount), nil
	case v.HostDisk != nil:
		return kind(infrav1.GuestVolumeHostDisk), nil
	case v.DownwardMetrics != nil:
		return kind(infrav1.GuestVolumeDownwardMetrics), nil
	case v.Secret != nil:
		return nil, []Named{{KindSecret, v.Secret.SecretName, p.Child("secret", "secretName")}}
	case v.ConfigMap != nil:
		return nil, []Named{{KindConfigMap, v.ConfigMap.Name, p.Child("configMap", "name")}}
	case v.Sysprep != nil && v.Sysprep.Secret != nil:
		return nil, []Named{{KindSecret, v.Sysprep.Secret.Name, p.Child("sysprep", "secret", "name")}}
	case v.Sysprep != nil && v.Sysprep.ConfigMap != nil:
		return nil, []Named{{KindConfigMap, v.Sysprep.ConfigMap.Name, p.Child("sysprep", "configMap", "name")}}
	case v.PersistentVolumeClaim != nil:
		return nil, []Named{{KindClaim, v.PersistentVolumeClaim.ClaimName, p.Child("persistentVolumeClaim", "claimName")}}
	case v.Ephemeral != nil && v.Ephemeral.PersistentVolumeClaim != nil:
		return nil, []Named{{KindClaim, v.Ephemeral.PersistentVolumeClaim.ClaimName, p.Child("ephemeral", "persistentVolumeClaim", "claimName")}}
	case v.MemoryDump != nil:
		return nil, []Named{{KindClaim, v.MemoryDump.ClaimName, p.Child("memoryDump", "claimName")}}
	case v.DataVolume != nil && !own[v.DataVolume.Name]:
		return nil, []Named{{KindDataVolume, v.DataVolume.Name, p.Child("dataVolume", "name")}}
	case v.ContainerDisk != nil && v.ContainerDisk.ImagePullSecret != "":
		// The kubelet sends its credentials to the registry the tenant names.
		return nil, []Named{{KindSecret, v.ContainerDisk.ImagePullSecret, p.Child("containerDisk", "imagePullSecret")}}
	case v.CloudInitNoCloud != nil:
		return nil, cloudInitSecrets(v.CloudInitNoCloud.UserDataSecretRef, v.CloudInitNoCloud.NetworkDataSecretRef, p.Child("cloudInitNoCloud"))
	case v.CloudInitConfigDrive != nil:
		return nil, cloudInitSecrets(v.CloudInitConfigDrive.UserDataSecretRef, v.CloudInitConfigDrive.NetworkDataSecretRef, p.Child("cloudInitConfigDrive"))
	}
	return nil, nil
}

func cloudInitSecrets(user, network *corev1.LocalObjectReference, p *field.Path) []Named {
	var named []Named
	if user != nil && user.Name != "" {
		named = append(named, Named{KindSecret, user.Name, p.Child("secretRef", "name")})
	}
	if network != nil && network.Name != "" {
		named = append(named, Named{KindSecret, network.Name, p.Child("networkDataSecretRef", "name")})
	}
	return named
}

// annotations refuses the keys KubeVirt, Multus or a CNI act on, unless
// the grant lists them.
func annotations(anns map[string]string, allow infrav1.GuestAllowances, p *field.Path) Refusals {
	var rs Refusals
	for _, key := range sortedKeys(anns) {
		if slices.Contains(allow.Annotations, key) {
			continue
		}
		for _, prefix := range deniedAnnotationPrefixes {
			if strings.HasPrefix(key, prefix) {
				rs = append(rs, refuse(RuleGuestAnnotation, p.Key(key),
					"annotations under %s make KubeVirt, Multus or a CNI act for the VM's pod; an administrator allows a key in a KubevirtClusterIdentity's spec.guest.annotations", prefix))
				break
			}
		}
	}
	return rs
}

// Network refuses a NetworkAttachmentDefinition "namespace/name" outside
// the allowed namespaces; a bare name is in the VM's namespace.
func Network(nad string, allowed []string, p *field.Path) Refusals {
	ns, _, found := strings.Cut(nad, "/")
	if !found || slices.Contains(allowed, ns) {
		return nil
	}
	return Refusals{refuse(RuleGuestNetworkNamespace, p,
		"NetworkAttachmentDefinition %q is in namespace %s; a VM may attach networks of %s, and others an administrator lists in a KubevirtClusterIdentity's spec.guest.networkNamespaces",
		nad, ns, strings.Join(allowed, ", "))}
}

// cloneSource refuses a DataVolume template that would have CDI copy a
// claim, snapshot or data source of another namespace: CDI authorizes the
// clone with the rights of whoever creates the DataVolume, the provider.
func cloneSource(t kubevirtv1.DataVolumeTemplateSpec, vmNamespace string, p *field.Path) Refusals {
	other := func(ns string) bool { return ns != "" && ns != vmNamespace }
	var ns string
	var fld *field.Path
	switch s := t.Spec.Source; {
	case s != nil && s.PVC != nil && other(s.PVC.Namespace):
		ns, fld = s.PVC.Namespace, p.Child("spec", "source", "pvc", "namespace")
	case s != nil && s.Snapshot != nil && other(s.Snapshot.Namespace):
		ns, fld = s.Snapshot.Namespace, p.Child("spec", "source", "snapshot", "namespace")
	case t.Spec.SourceRef != nil && t.Spec.SourceRef.Namespace != nil && other(*t.Spec.SourceRef.Namespace):
		ns, fld = *t.Spec.SourceRef.Namespace, p.Child("spec", "sourceRef", "namespace")
	default:
		return nil
	}
	return Refusals{refuse(RuleGuestCloneSource, fld,
		"a disk may be cloned only from the VM's namespace %s, not from %s; use rootDisk for images every cluster shares", vmNamespace, ns)}
}

// claimDataSource refuses a DataVolume template whose claim is filled
// through spec.pvc or spec.storage's dataSource or dataSourceRef: a clone
// of any claim or snapshot, of any namespace with dataSourceRef, or a
// populator, all outside the checks on source and sourceRef.
func claimDataSource(t kubevirtv1.DataVolumeTemplateSpec, p *field.Path) Refusals {
	var rs Refusals
	check := func(ds *corev1.TypedLocalObjectReference, dsr *corev1.TypedObjectReference, p *field.Path) {
		if ds != nil {
			rs = append(rs, refuse(RuleGuestCloneSource, p.Child("dataSource"),
				"a DataVolume template fills its disk through source or sourceRef, which the policy checks"))
		}
		if dsr != nil {
			rs = append(rs, refuse(RuleGuestCloneSource, p.Child("dataSourceRef"),
				"a DataVolume template fills its disk through source or sourceRef, which the policy checks"))
		}
	}
	if c := t.Spec.PVC; c != nil {
		check(c.DataSource, c.DataSourceRef, p.Child("pvc"))
	}
	if st := t.Spec.Storage; st != nil {
		check(st.DataSource, st.DataSourceRef, p.Child("storage"))
	}
	return rs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (n Named) String() string { return fmt.Sprintf("%s %s", n.Kind, n.Name) }

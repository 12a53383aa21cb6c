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

// Package tenantnet creates the per-cluster Multus network of a tenant
// cluster: a NetworkAttachmentDefinition rendered from an administrator's
// template, typically a bridge with a VLAN of the cluster's own. Multus may
// be missing from an infra cluster, so NetworkAttachmentDefinitions are
// handled as unstructured objects, read live rather than through a watch.
package tenantnet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// DefaultNetworkName is the VM network name of the per-cluster network.
const DefaultNetworkName = "tenant"

// GVK is the kind of Multus networks.
var GVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// TemplateError is a problem with the template the administrator must fix.
type TemplateError struct{ msg string }

func (e *TemplateError) Error() string { return e.msg }

// VLANError says no VLAN can be given to the cluster.
type VLANError struct{ msg string }

func (e *VLANError) Error() string { return e.msg }

// IsTemplateError reports whether err is a TemplateError.
func IsTemplateError(err error) bool { var t *TemplateError; return errors.As(err, &t) }

// IsVLANError reports whether err is a VLANError.
func IsVLANError(err error) bool { var v *VLANError; return errors.As(err, &v) }

// NetworkName is the VM network name of the per-cluster network.
func NetworkName(pc *infrav1.PerClusterNetwork) string {
	if pc.Name != "" {
		return pc.Name
	}
	return DefaultNetworkName
}

// Name is the name of the cluster's generated NetworkAttachmentDefinition.
func Name(kc *infrav1.KubevirtCluster) string {
	return kc.Name + "-" + NetworkName(kc.Spec.Network.PerCluster)
}

// TemplateHash identifies a template in the NetworkTemplateLabel.
func TemplateHash(ref infrav1.NamespacedRef) string {
	sum := sha256.Sum256([]byte(ref.Namespace + "/" + ref.Name))
	return hex.EncodeToString(sum[:])[:16]
}

// Network is the per-cluster network as a Multus network of the VMs: the
// generated NetworkAttachmentDefinition in infra namespace ns.
func Network(kc *infrav1.KubevirtCluster, ns string) infrav1.MultusNetwork {
	pc := kc.Spec.Network.PerCluster
	return infrav1.MultusNetwork{
		Name: NetworkName(pc), NetworkAttachmentDefinition: ns + "/" + Name(kc),
		Binding: pc.Binding, Primary: pc.Primary,
	}
}

// Range parses the template's VLAN range annotation.
func Range(tmpl *unstructured.Unstructured) (first, last int32, err error) {
	raw, ok := tmpl.GetAnnotations()[infrav1.VLANRangeAnnotation]
	if !ok {
		return 0, 0, &TemplateError{fmt.Sprintf("template %s/%s has no %s annotation; set vlanID or annotate the template with a range like \"100-199\"",
			tmpl.GetNamespace(), tmpl.GetName(), infrav1.VLANRangeAnnotation)}
	}
	lo, hi, found := strings.Cut(raw, "-")
	a, errA := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
	b, errB := strconv.ParseInt(strings.TrimSpace(hi), 10, 32)
	if !found || errA != nil || errB != nil || a < 1 || b > 4094 || a > b {
		return 0, 0, &TemplateError{fmt.Sprintf("template %s/%s: %s=%q is not a range like \"100-199\" within 1-4094",
			tmpl.GetNamespace(), tmpl.GetName(), infrav1.VLANRangeAnnotation, raw)}
	}
	return int32(a), int32(b), nil
}

// templateData is what a template may refer to.
type templateData struct {
	VLANID      int32
	ClusterName string
	Namespace   string
}

// Render returns the cluster's NetworkAttachmentDefinition in ns made from
// tmpl with the given VLAN. The template's annotations (such as the SR-IOV
// resource name) are kept; its spec.config must render to JSON.
func Render(tmpl *unstructured.Unstructured, kc *infrav1.KubevirtCluster, clusterName, ns string, vlan int32) (*unstructured.Unstructured, error) {
	ref := kc.Spec.Network.PerCluster.TemplateRef
	raw, _, err := unstructured.NestedString(tmpl.Object, "spec", "config")
	if err != nil || raw == "" {
		return nil, &TemplateError{fmt.Sprintf("template %s/%s has no spec.config", ref.Namespace, ref.Name)}
	}
	t, err := template.New("config").Option("missingkey=error").Parse(raw)
	if err != nil {
		return nil, &TemplateError{fmt.Sprintf("template %s/%s: %v", ref.Namespace, ref.Name, err)}
	}
	var out bytes.Buffer
	if err := t.Execute(&out, templateData{VLANID: vlan, ClusterName: clusterName, Namespace: ns}); err != nil {
		return nil, &TemplateError{fmt.Sprintf("template %s/%s: %v", ref.Namespace, ref.Name, err)}
	}
	if !json.Valid(out.Bytes()) {
		return nil, &TemplateError{fmt.Sprintf("template %s/%s renders no valid JSON for VLAN %d: %s", ref.Namespace, ref.Name, vlan, out.String())}
	}
	nad := &unstructured.Unstructured{}
	nad.SetGroupVersionKind(GVK)
	nad.SetNamespace(ns)
	nad.SetName(Name(kc))
	nad.SetLabels(map[string]string{infrav1.ClusterNameLabel: clusterName, infrav1.NetworkTemplateLabel: TemplateHash(ref)})
	annotations := maps.Clone(tmpl.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, infrav1.VLANRangeAnnotation)
	delete(annotations, "kubectl.kubernetes.io/last-applied-configuration")
	annotations[infrav1.VLANAnnotation] = strconv.Itoa(int(vlan))
	nad.SetAnnotations(annotations)
	if err := unstructured.SetNestedField(nad.Object, out.String(), "spec", "config"); err != nil {
		return nil, err
	}
	return nad, nil
}

// VLANOf reads the VLAN annotation of a generated network; 0 if none.
func VLANOf(nad *unstructured.Unstructured) int32 {
	v, err := strconv.ParseInt(nad.GetAnnotations()[infrav1.VLANAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

// Pick returns the VLAN for a cluster: the requested one if set (an error
// if another cluster has it), else the current one (an error if another
// network took it meanwhile; the cluster never moves), else the lowest free
// in [first, last]. used maps VLANs to the network holding them, excluding the
// cluster's own.
func Pick(requested *int32, current int32, used map[int32]string, first, last int32) (int32, error) {
	if requested != nil {
		if holder, taken := used[*requested]; taken {
			return 0, &VLANError{fmt.Sprintf("VLAN %d is used by %s", *requested, holder)}
		}
		return *requested, nil
	}
	if current != 0 {
		// Never moved: running VMs are on it.
		if holder, taken := used[current]; taken {
			return 0, &VLANError{fmt.Sprintf("the cluster's VLAN %d is now also used by %s", current, holder)}
		}
		return current, nil
	}
	for v := first; v <= last; v++ {
		if _, taken := used[v]; !taken {
			return v, nil
		}
	}
	return 0, &VLANError{fmt.Sprintf("every VLAN in %d-%d is in use", first, last)}
}

// ClusterNetworks are the Multus networks every machine of the cluster gets:
// the listed ones and the per-cluster one, as created in infra namespace ns
// (or as recorded in the status).
func ClusterNetworks(kc *infrav1.KubevirtCluster, ns string) []infrav1.MultusNetwork {
	nets := append([]infrav1.MultusNetwork(nil), kc.Spec.Network.Networks...)
	if kc.Spec.Network.PerCluster != nil {
		n := Network(kc, ns)
		if kc.Status.Network.PerCluster != "" {
			n.NetworkAttachmentDefinition = kc.Status.Network.PerCluster
		}
		nets = append(nets, n)
	}
	return nets
}

// NodeAddressNetwork is the network whose addresses a machine reports
// first: the machine's choice, else the cluster's.
func NodeAddressNetwork(kc *infrav1.KubevirtCluster, km *infrav1.KubevirtMachine) string {
	if km.Spec.NodeAddressNetwork != "" || kc == nil {
		return km.Spec.NodeAddressNetwork
	}
	return kc.Spec.Network.NodeAddressNetwork
}

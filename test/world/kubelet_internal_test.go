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

package world

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// flannelDaemonSet reads the DaemonSet the flavors' CNI ClusterResourceSet
// installs.
func flannelDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), testenv.FlavorAddons[0]))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		cm := &corev1.ConfigMap{}
		if err := dec.Decode(cm); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if cm.Kind != "ConfigMap" {
			continue
		}
		inner := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(cm.Data["flannel.yaml"])), 4096)
		for {
			var obj runtime.RawExtension
			if err := inner.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			ds := &appsv1.DaemonSet{}
			if err := yaml.Unmarshal(obj.Raw, ds); err != nil {
				t.Fatal(err)
			}
			if ds.Kind == "DaemonSet" {
				return ds
			}
		}
	}
	t.Fatal("no DaemonSet in the CNI addon")
	return nil
}

func TestWritesCNIConfig(t *testing.T) {
	flannel := flannelDaemonSet(t)
	linux := map[string]string{corev1.LabelOSStable: "linux"}
	controlPlane := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	noConfDir := flannel.DeepCopy()
	noConfDir.Spec.Template.Spec.Volumes = nil
	intolerant := flannel.DeepCopy()
	intolerant.Spec.Template.Spec.Tolerations = nil
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		node *corev1.Node
		want bool
	}{
		{"flannel on a worker waiting for its network", flannel,
			nodeWith(linux, readyTaints(nil, corev1.ConditionFalse)...), true},
		{"flannel on a control plane", flannel,
			nodeWith(linux, readyTaints([]corev1.Taint{controlPlane}, corev1.ConditionFalse)...), true},
		{"not on a node that is not linux", flannel, nodeWith(map[string]string{corev1.LabelOSStable: "windows"}), false},
		{"a DaemonSet that writes nothing to the CNI directory", noConfDir, nodeWith(linux), false},
		{"no tolerations: kept off a node not ready yet", intolerant,
			nodeWith(linux, readyTaints(nil, corev1.ConditionFalse)...), false},
		{"no tolerations: kept off a control plane", intolerant, nodeWith(linux, controlPlane), false},
		{"no tolerations on an untainted node", intolerant, nodeWith(linux), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(WritesCNIConfig(tc.ds, tc.node)).To(Equal(tc.want))
		})
	}
}

func TestReadyTaints(t *testing.T) {
	g := NewWithT(t)
	cp := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	notReady := readyTaints([]corev1.Taint{cp}, corev1.ConditionFalse)
	g.Expect(notReady).To(ConsistOf(cp, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}))
	lost := readyTaints(notReady, corev1.ConditionUnknown)
	g.Expect(lost).To(ConsistOf(cp, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}))
	g.Expect(readyTaints(lost, corev1.ConditionTrue)).To(ConsistOf(cp))
}

func nodeWith(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: taints}}
	n.Labels = labels
	return n
}

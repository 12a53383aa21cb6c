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

// Command cdi-manifests prints, as multi-document YAML, what installing
// CDI v1.64.0 puts on a cluster: the CDI CRD and a CDI CR "cdi" (what a
// platform engineer applies with the operator), then what CDI's operator installs for it in namespace "cdi":
// CRDs, cluster and namespaced RBAC, service accounts, Services, the
// Deployments (for their flags), and the webhook configurations and
// APIService, without their CA bundle, which the test world sets. The
// world applies it and runs cdi-apiserver and cdi-controller itself,
// instead of keeping a copy of CDI's resources in this repository.
package main

import (
	"fmt"
	"os"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"kubevirt.io/containerized-data-importer/pkg/operator/resources/cluster"
	"kubevirt.io/containerized-data-importer/pkg/operator/resources/namespaced"
	"kubevirt.io/containerized-data-importer/pkg/operator/resources/operator"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// namespace is where the world installs CDI, the namespace its components
// assume when they run outside a pod.
const namespace = "cdi"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cdi-manifests:", err)
		os.Exit(1)
	}
}

func run() error {
	clusterArgs := &cluster.FactoryArgs{Namespace: namespace}
	static, err := cluster.CreateAllStaticResources(clusterArgs)
	if err != nil {
		return err
	}
	dynamic, err := cluster.CreateAllDynamicResources(clusterArgs)
	if err != nil {
		return err
	}
	const version = "v1.64.0"
	inNamespace, err := namespaced.CreateAllResources(&namespaced.FactoryArgs{
		OperatorVersion: version, DeployClusterResources: "true", Verbosity: "1", PullPolicy: "IfNotPresent",
		ControllerImage: "quay.io/kubevirt/cdi-controller:" + version, ImporterImage: "quay.io/kubevirt/cdi-importer:" + version,
		ClonerImage: "quay.io/kubevirt/cdi-cloner:" + version, OvirtPopulatorImage: "quay.io/kubevirt/cdi-importer:" + version,
		APIServerImage: "quay.io/kubevirt/cdi-apiserver:" + version, UploadProxyImage: "quay.io/kubevirt/cdi-uploadproxy:" + version,
		UploadServerImage: "quay.io/kubevirt/cdi-uploadserver:" + version, Namespace: namespace,
		ControllerReplicas: 1, APIServerReplicas: 1, UploadProxyReplicas: 1,
	})
	if err != nil {
		return err
	}
	cdiCRD := operator.NewCdiCrd()
	cdiCRD.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	cr := &cdiv1.CDI{TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "CDI"}, ObjectMeta: metav1.ObjectMeta{Name: "cdi"}}
	objects := []client.Object{cdiCRD, cr}
	// The operator's factories build maps; a stable order keeps the
	// output reviewable.
	for _, group := range [][]client.Object{static, inNamespace, dynamic} {
		sort.SliceStable(group, func(i, j int) bool { return key(group[i]) < key(group[j]) })
		objects = append(objects, group...)
	}
	for _, o := range objects {
		out, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

func key(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

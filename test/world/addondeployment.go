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
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
)

// errDropped is what a connection the network dropped fails with.
var errDropped = os.ErrDeadlineExceeded

// ccmDeployment is a tenant Deployment whose container runs
// kubevirt-cloud-controller-manager (--cloud-provider=kubevirt). No pod
// runs in a tenant cluster; the Deployment stands for its pod, as a CNI's
// DaemonSet does for the kubelets.
type ccmDeployment struct {
	deployment appsv1.Deployment
	container  corev1.Container
}

// findCCM finds the tenant's CCM Deployment, if any.
func findCCM(ctx context.Context, c inmemoryruntime.Client) (ccmDeployment, bool, error) {
	var deployments []appsv1.Deployment
	if err := listAs(ctx, c, appsv1.SchemeGroupVersion.WithKind("DeploymentList"), &deployments); err != nil {
		return ccmDeployment{}, false, err
	}
	for _, d := range deployments {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if slices.Contains(ctr.Args, "--cloud-provider=kubevirt") || slices.Contains(ctr.Command, "--cloud-provider=kubevirt") {
				return ccmDeployment{deployment: d, container: ctr}, true, nil
			}
		}
	}
	return ccmDeployment{}, false, nil
}

// arg is the value of a --flag=value argument, or "".
func (d ccmDeployment) arg(flag string) string {
	for _, a := range append(slices.Clone(d.container.Command), d.container.Args...) {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// file reads a file as the container sees it: a key of the ConfigMap or
// Secret volume mounted at a directory holding it.
func (d ccmDeployment) file(ctx context.Context, c inmemoryruntime.Client, file string) ([]byte, error) {
	if file == "" {
		return nil, fmt.Errorf("no file named")
	}
	for _, m := range d.container.VolumeMounts {
		rel, ok := strings.CutPrefix(path.Clean(file), strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || m.SubPath != "" {
			continue
		}
		i := slices.IndexFunc(d.deployment.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			continue
		}
		key := types.NamespacedName{Namespace: d.deployment.Namespace}
		vol := d.deployment.Spec.Template.Spec.Volumes[i]
		switch {
		case vol.ConfigMap != nil:
			key.Name = vol.ConfigMap.Name
			cm := &corev1.ConfigMap{}
			if err := getAs(ctx, c, corev1.SchemeGroupVersion.WithKind("ConfigMap"), key, cm); err != nil {
				return nil, err
			}
			if v, ok := cm.Data[itemKey(vol.ConfigMap.Items, rel)]; ok {
				return []byte(v), nil
			}
		case vol.Secret != nil:
			key.Name = vol.Secret.SecretName
			secret := &corev1.Secret{}
			if err := getAs(ctx, c, corev1.SchemeGroupVersion.WithKind("Secret"), key, secret); err != nil {
				return nil, err
			}
			if v, ok := secret.Data[itemKey(vol.Secret.Items, rel)]; ok {
				return v, nil
			}
		}
		return nil, fmt.Errorf("%s: no such key in %s", file, key)
	}
	return nil, fmt.Errorf("%s: on no volume of Deployment %s/%s", file, d.deployment.Namespace, d.deployment.Name)
}

// itemKey is the key a volume's items project to path, else path itself.
func itemKey(items []corev1.KeyToPath, rel string) string {
	for _, item := range items {
		if item.Path == rel {
			return item.Key
		}
	}
	return rel
}

// getAs reads an object of the in-memory API server into a typed one,
// however a client wrote it (see listAs).
func getAs(ctx context.Context, c inmemoryruntime.Client, gvk schema.GroupVersionKind, key types.NamespacedName, obj any) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, u); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

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
	"path"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// addonDeployment is a tenant Deployment whose container runs one of the
// infra cluster's add-ons: kubevirt-cloud-controller-manager, or
// kubevirt-csi-driver's controller. No pod runs in a tenant cluster; the
// Deployment stands for its pod, as a CNI's DaemonSet does for the
// kubelets.
type addonDeployment struct {
	deployment appsv1.Deployment
	container  corev1.Container
}

// findCCM finds the tenant's CCM Deployment, if any.
func findCCM(ctx context.Context, c inmemoryruntime.Client) (addonDeployment, bool, error) {
	return findAddon(ctx, c, func(a addonDeployment) bool { return a.hasArg("--cloud-provider=kubevirt") })
}

// findCSIController finds the Deployment running the tenant's CSI
// driver's controller service, if any.
func findCSIController(ctx context.Context, c inmemoryruntime.Client) (addonDeployment, bool, error) {
	return findAddon(ctx, c, func(a addonDeployment) bool {
		return a.hasArg("--run-controller-service=true") && a.arg("--infra-cluster-kubeconfig") != ""
	})
}

// findAddon finds the first container of the tenant's Deployments that
// matches.
func findAddon(ctx context.Context, c inmemoryruntime.Client, match func(addonDeployment) bool) (addonDeployment, bool, error) {
	var deployments []appsv1.Deployment
	if err := listAs(ctx, c, appsv1.SchemeGroupVersion.WithKind("DeploymentList"), &deployments); err != nil {
		return addonDeployment{}, false, err
	}
	for _, d := range deployments {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if a := (addonDeployment{deployment: d, container: ctr}); match(a) {
				return a, true, nil
			}
		}
	}
	return addonDeployment{}, false, nil
}

// hasArg says whether the container is run with an argument.
func (d addonDeployment) hasArg(arg string) bool {
	return slices.Contains(d.container.Args, arg) || slices.Contains(d.container.Command, arg)
}

// arg is the value of a --flag=value argument, or "".
func (d addonDeployment) arg(flag string) string {
	for _, a := range append(slices.Clone(d.container.Command), d.container.Args...) {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// file reads a file as the container sees it: a key of the ConfigMap or
// Secret volume mounted at a directory holding it.
func (d addonDeployment) file(ctx context.Context, c inmemoryruntime.Client, file string) ([]byte, error) {
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

// envReference matches a $(NAME) reference in a container's arguments.
var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces the $(NAME) references in an argument's value with the
// container's environment variables, as the kubelet does; a variable
// taken from a Secret or ConfigMap key is read from it. A reference to
// no variable stays as written, as the kubelet leaves it.
func (d addonDeployment) expand(ctx context.Context, c inmemoryruntime.Client, value string) (string, error) {
	var err error
	out := envReference.ReplaceAllStringFunc(value, func(ref string) string {
		name := envReference.FindStringSubmatch(ref)[1]
		i := slices.IndexFunc(d.container.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || err != nil {
			return ref
		}
		env := d.container.Env[i]
		key := types.NamespacedName{Namespace: d.deployment.Namespace}
		switch from := env.ValueFrom; {
		case from == nil:
			return env.Value
		case from.SecretKeyRef != nil:
			key.Name = from.SecretKeyRef.Name
			secret := &corev1.Secret{}
			if err = getAs(ctx, c, corev1.SchemeGroupVersion.WithKind("Secret"), key, secret); err == nil {
				return string(secret.Data[from.SecretKeyRef.Key])
			}
		case from.ConfigMapKeyRef != nil:
			key.Name = from.ConfigMapKeyRef.Name
			cm := &corev1.ConfigMap{}
			if err = getAs(ctx, c, corev1.SchemeGroupVersion.WithKind("ConfigMap"), key, cm); err == nil {
				return cm.Data[from.ConfigMapKeyRef.Key]
			}
		}
		return ref
	})
	if err != nil {
		return "", fmt.Errorf("the container's variable in %s: %w", value, err)
	}
	return out, nil
}

// updateReleasing writes an object of the in-memory tenant server, and
// removes it if it is being deleted and has no finalizer left. A real API
// server removes such an object itself; the in-memory one leaves that to
// a loop that runs every 30 s or more, and removes it at once only when
// the delete is asked for again.
func updateReleasing(ctx context.Context, c inmemoryruntime.Client, obj client.Object) error {
	if err := c.Update(ctx, obj); err != nil || obj.GetDeletionTimestamp().IsZero() || len(obj.GetFinalizers()) > 0 {
		return err
	}
	return client.IgnoreNotFound(c.Delete(ctx, obj))
}

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

package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRealCDIControlPlane installs CDI as its operator would and checks
// that its real controllers and API server do their part: the config
// controller publishes CDIConfig's status, the storage profile controller
// makes a StorageProfile per StorageClass, the DataVolume webhook refuses
// a DataVolume without a source with CDI's own message, and the import
// controller waits for an admin to complete the StorageProfile of a
// provisioner it does not know, then makes the claim of an HTTP import.
func TestRealCDIControlPlane(t *testing.T) {
	env, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Run("every kind is served", func(t *testing.T) { checkServesEveryKind(t, env) })
	ctx := context.Background()
	if err := env.StartCDI(ctx); err != nil {
		t.Fatal(err)
	}
	c := env.Client
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/disk"}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}

	eventually(t, "CDIConfig status from the config controller", func() (bool, error) {
		config := &cdiv1.CDIConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: "config"}, config); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return config.Status.FilesystemOverhead != nil && config.Status.DefaultPodResourceRequirements != nil, nil
	})
	eventually(t, "a StorageProfile for the StorageClass", func() (bool, error) {
		profile := &cdiv1.StorageProfile{}
		if err := c.Get(ctx, client.ObjectKey{Name: class.Name}, profile); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return profile.Status.StorageClass != nil && *profile.Status.StorageClass == class.Name, nil
	})

	noSource := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "no-source"},
		Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	err = c.Create(ctx, noSource)
	if err == nil || !strings.Contains(err.Error(), "datavolume-validate.cdi.kubevirt.io") {
		t.Fatalf("a DataVolume without a source: %v, want CDI's webhook to refuse it", err)
	}
	t.Logf("refused: %v", err)

	dv := noSource.DeepCopy()
	dv.Name = "import"
	dv.Spec.Source = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://images.example/disk.qcow2"}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	// CDI knows no access mode for an unknown provisioner: it waits, as
	// on a cluster, until an admin completes the StorageProfile.
	eventually(t, "ErrClaimNotValid for a provisioner CDI does not know", func() (bool, error) {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(dv.Namespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == dv.Name && e.Reason == "ErrClaimNotValid" {
				return true, nil
			}
		}
		return false, nil
	})
	profile := &cdiv1.StorageProfile{}
	if err := c.Get(ctx, client.ObjectKey{Name: class.Name}, profile); err != nil {
		t.Fatal(err)
	}
	filesystem := corev1.PersistentVolumeFilesystem
	profile.Spec.ClaimPropertySets = []cdiv1.ClaimPropertySet{{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &filesystem}}
	if err := c.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the import's claim from CDI's controllers", func() (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(dv), pvc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return len(pvc.OwnerReferences) == 1 && pvc.OwnerReferences[0].Kind == "DataVolume" &&
			pvc.Annotations["cdi.kubevirt.io/storage.import.endpoint"] == dv.Spec.Source.HTTP.URL, nil
	})
}

func eventually(t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return f() })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

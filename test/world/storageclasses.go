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
	"slices"
	"sync"
	_ "unsafe" // for go:linkname

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api" // holds the list below
)

// inmemoryStorageV1 is what Cluster API's in-memory API server answers for
// storage.k8s.io/v1, and the only storage resources it serves: those
// Cluster API needs (VolumeAttachments, CSIDrivers). A real tenant API
// server also serves StorageClasses, which the cloud-provider-csi flavor
// creates; without them the simulator would refuse what a real cluster
// takes. Its handler stores any kind of its scheme once discovery lists it.
//
//go:linkname inmemoryStorageV1 sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api.storageV1ResourceList
var inmemoryStorageV1 *metav1.APIResourceList

// inmemoryCoreV1 is what it answers for the core group: no Events, which
// every API server serves and the world's cloud controller manager
// records, and no PersistentVolumeClaims or PersistentVolumes, which the
// CSI driver's users make and its provisioner binds.
//
//go:linkname inmemoryCoreV1 sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api.corev1APIResourceList
var inmemoryCoreV1 *metav1.APIResourceList

var serveStorageClasses sync.Once

// addStorageClasses makes the in-memory tenant API servers serve
// StorageClasses, Events, PersistentVolumeClaims and PersistentVolumes,
// as every Kubernetes API server does.
func addStorageClasses() {
	serveStorageClasses.Do(func() {
		verbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
		serve(inmemoryStorageV1, metav1.APIResource{Name: "storageclasses", SingularName: "storageclass", Kind: "StorageClass", ShortNames: []string{"sc"}, Verbs: verbs})
		serve(inmemoryCoreV1, metav1.APIResource{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", ShortNames: []string{"ev"}, Verbs: verbs})
		serve(inmemoryCoreV1, metav1.APIResource{Name: "persistentvolumeclaims", SingularName: "persistentvolumeclaim", Namespaced: true, Kind: "PersistentVolumeClaim", ShortNames: []string{"pvc"}, Verbs: verbs})
		serve(inmemoryCoreV1, metav1.APIResource{Name: "persistentvolumes", SingularName: "persistentvolume", Kind: "PersistentVolume", ShortNames: []string{"pv"}, Verbs: verbs})
	})
}

// serve adds a resource to a group version's discovery, once.
func serve(list *metav1.APIResourceList, r metav1.APIResource) {
	if !slices.ContainsFunc(list.APIResources, func(have metav1.APIResource) bool { return have.Name == r.Name }) {
		list.APIResources = append(list.APIResources, r)
	}
}

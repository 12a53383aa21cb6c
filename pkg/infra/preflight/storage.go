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

package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons of the storage findings.
const (
	CloneMethodReason       = "CloneMethod"
	NoStorageClassReason    = "NoStorageClass"
	CopyOnlyStorageReason   = "CopyOnlyStorage"
	ProfileIncompleteReason = "StorageProfileIncomplete"
	NoReadWriteManyReason   = "NoReadWriteManyStorage"
	ReadWriteManyReason     = "ReadWriteManyStorage"
)

const (
	defaultClassAnnotation  = "storageclass.kubernetes.io/is-default-class"
	storageCheck            = "storage"
	liveMigrationCheck      = "live-migration"
	hostAssistedExplanation = "host-assisted copy: a pod reads the whole golden image and writes every root disk"
)

// storage is what the storage checks read: the classes and CDI's profile
// of each.
type storage struct {
	classes  []storagev1.StorageClass
	profiles map[string]cdiv1.StorageProfile
}

func readStorage(ctx context.Context, c client.Client, served sets.Set[string]) (storage, error) {
	s := storage{profiles: map[string]cdiv1.StorageProfile{}}
	classes := &storagev1.StorageClassList{}
	if err := c.List(ctx, classes); err != nil {
		return s, fmt.Errorf("listing StorageClasses: %w", err)
	}
	s.classes = classes.Items
	if !served.Has(cdiAPI) {
		return s, nil
	}
	profiles := &cdiv1.StorageProfileList{}
	if err := c.List(ctx, profiles); err != nil {
		return s, fmt.Errorf("listing StorageProfiles: %w", err)
	}
	for _, p := range profiles.Items {
		s.profiles[p.Name] = p
	}
	return s, nil
}

// storageFindings says how each class clones root disks from a golden
// image (CDI's StorageProfile status, or the CDI CR's override), warns when
// every class copies, and whether any class offers ReadWriteMany for live
// migration.
func storageFindings(s storage, cdi *cdiv1.CDI, err error) []Finding {
	if err != nil {
		return []Finding{{storageCheck, Warning, ReadFailedReason, err.Error()}}
	}
	if len(s.classes) == 0 {
		return []Finding{{storageCheck, Error, NoStorageClassReason, "the cluster has no StorageClass: root disks have nowhere to go"}}
	}
	var override *cdiv1.CDICloneStrategy
	if cdi != nil {
		override = cdi.Spec.CloneStrategyOverride
	}
	var out []Finding
	var smart, rwx []string
	for _, sc := range s.classes {
		name := sc.Name
		if sc.Annotations[defaultClassAnnotation] == "true" {
			name += " (default)"
		}
		p, ok := s.profiles[sc.Name]
		if !ok {
			out = append(out, Finding{storageCheck, Info, CloneMethodReason, fmt.Sprintf("class %s has no StorageProfile yet (CDI writes one per class)", name)})
			continue
		}
		method := p.Status.CloneStrategy
		if override != nil {
			method = override
		}
		modes := accessModes(p)
		switch {
		case method == nil:
			out = append(out, Finding{storageCheck, Info, CloneMethodReason, fmt.Sprintf("class %s: CDI reports no clone method yet", name)})
		case *method == cdiv1.CloneStrategyHostAssisted:
			out = append(out, Finding{storageCheck, Info, CloneMethodReason, fmt.Sprintf("class %s clones by %s", name, hostAssistedExplanation)})
		default:
			smart = append(smart, sc.Name)
			out = append(out, Finding{storageCheck, OK, CloneMethodReason, fmt.Sprintf("class %s clones by %s", name, *method)})
		}
		if len(modes) == 0 {
			out = append(out, Finding{storageCheck, Warning, ProfileIncompleteReason, fmt.Sprintf(
				"StorageProfile %s has no access and volume modes: CDI refuses root disks on it that do not give both; set its spec.claimPropertySets", sc.Name)})
		}
		if slices.Contains(modes, corev1.ReadWriteMany) {
			rwx = append(rwx, sc.Name)
		}
	}
	if len(s.profiles) == 0 {
		// Without CDI's profiles nothing says how classes clone or which
		// access modes they offer.
		return out
	}
	if len(smart) == 0 {
		out = append(out, Finding{storageCheck, Warning, CopyOnlyStorageReason, fmt.Sprintf(
			"no StorageClass clones by snapshot or CSI clone, so every machine's root disk is a %s; "+
				"a class whose driver has a VolumeSnapshotClass or CSI cloning copies nothing through a pod", hostAssistedExplanation)})
	}
	if len(rwx) == 0 {
		out = append(out, Finding{liveMigrationCheck, Warning, NoReadWriteManyReason,
			"no StorageProfile offers ReadWriteMany: VMs cannot live-migrate, so infra-node drains restart tenant machines and in-place CPU and memory changes roll them"})
	} else {
		out = append(out, Finding{liveMigrationCheck, OK, ReadWriteManyReason,
			"ReadWriteMany root disks, which live migration needs, on class " + strings.Join(rwx, ", ")})
	}
	return out
}

// accessModes are every access mode a profile offers, from its status
// (what CDI uses: the spec if an admin set one, else what CDI knows of the
// provisioner).
func accessModes(p cdiv1.StorageProfile) []corev1.PersistentVolumeAccessMode {
	var modes []corev1.PersistentVolumeAccessMode
	for _, set := range p.Status.ClaimPropertySets {
		modes = append(modes, set.AccessModes...)
	}
	return modes
}

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

package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Image is what the simulator knows a node image holds: what a real guest
// booted from it could run (docs/simulator.md#the-image-catalog).
type Image struct {
	// OS names the distribution, for messages.
	OS string
	// Reads is the bootstrap agent: "cloud-init" or "ignition".
	Reads string
	// Kubernetes is the version of the kubeadm and kubelet the image
	// carries; empty for an image without them.
	Kubernetes string
	// Runtime says the image carries a container runtime (containerd).
	Runtime bool
	// GuestAgent says qemu-guest-agent starts at boot.
	GuestAgent bool
}

// versionedTag is the image-builder naming of an image for one Kubernetes
// version: a tag or file name holding kube-v1.34.1, or a tag v1.34.1.
var versionedTag = regexp.MustCompile(`(?:kube-|:)(v[0-9]+\.[0-9]+\.[0-9]+)`)

// Catalog maps image references (an http URL, or a registry reference with
// or without docker://) to what the images hold. Unknown images hold no
// Kubernetes.
type Catalog struct {
	mu sync.RWMutex
	// exact holds images by their whole reference.
	exact map[string]Image
	// versioned holds repositories whose tag is the Kubernetes version.
	versioned map[string]Image
	// builds counts the builds pushed under each tagged reference; the
	// registry serves the newest.
	builds map[string]int
	// pushedAs maps a reference by digest (repository@sha256:...) to the
	// tagged reference its build was pushed as.
	pushedAs map[string]string
}

// NewCatalog returns the images the world knows by default: the
// Kubernetes-ready container disks the flavors default to, and the stock
// cloud images users try first.
func NewCatalog() *Catalog {
	c := &Catalog{exact: map[string]Image{}, versioned: map[string]Image{}, builds: map[string]int{}, pushedAs: map[string]string{}}
	ubuntuKube := Image{OS: "Ubuntu 24.04", Reads: "cloud-init", Runtime: true, GuestAgent: true}
	c.AddVersioned("quay.io/capk/ubuntu-2404-container-disk", ubuntuKube)
	ubuntuKube.OS = "Ubuntu 22.04"
	c.AddVersioned("quay.io/capk/ubuntu-2204-container-disk", ubuntuKube)
	stockUbuntu := Image{OS: "Ubuntu 24.04", Reads: "cloud-init"}
	c.Add("https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img", stockUbuntu)
	c.Add("quay.io/containerdisks/ubuntu:24.04", stockUbuntu)
	stockUbuntu.OS = "Ubuntu 22.04"
	c.Add("quay.io/containerdisks/ubuntu:22.04", stockUbuntu)
	c.Add("https://stable.release.flatcar-linux.net/amd64-usr/current/flatcar_production_kubevirt_image.qcow2",
		Image{OS: "Flatcar Container Linux", Reads: "ignition", Runtime: true, GuestAgent: true})
	return c
}

func normalRef(ref string) string {
	return strings.TrimPrefix(strings.TrimPrefix(ref, "docker://"), "oci-archive://")
}

// Add records one image by its exact reference.
func (c *Catalog) Add(ref string, img Image) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exact[normalRef(ref)] = img
}

// AddVersioned records a repository of images, one per Kubernetes version,
// tagged with the version (repository:v1.34.1).
func (c *Catalog) AddVersioned(repository string, img Image) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.versioned[normalRef(repository)] = img
}

// Lookup says what an image holds. An image recorded by reference wins;
// then a versioned repository; then any image named the way image-builder
// names its artifacts (ubuntu-2404-kube-v1.34.1), taken as an image-builder
// image with that Kubernetes version: Flatcar (Ignition) when its name says
// flatcar, else Ubuntu (cloud-init).
func (c *Catalog) Lookup(ref string) (Image, bool) {
	ref = normalRef(ref)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if tagged, ok := c.pushedAs[ref]; ok {
		ref = tagged
	}
	if img, ok := c.exact[ref]; ok {
		return img, true
	}
	if repo, tag, ok := strings.Cut(ref, ":"); ok && !strings.Contains(tag, "/") {
		if img, ok := c.versioned[repo]; ok && versionedTag.MatchString(":"+tag) {
			img.Kubernetes = tag
			return img, true
		}
	}
	if m := versionedTag.FindStringSubmatch(ref); m != nil && strings.Contains(ref, "kube-") {
		if strings.Contains(ref, "flatcar") {
			return Image{OS: "image-builder Flatcar", Reads: "ignition", Kubernetes: m[1], Runtime: true, GuestAgent: true}, true
		}
		return Image{OS: "image-builder Ubuntu", Reads: "cloud-init", Kubernetes: m[1], Runtime: true, GuestAgent: true}, true
	}
	return Image{}, false
}

// Digest is the digest (sha256:...) the registry serves for a tagged
// reference now, as a registry client such as CDI's poller reads it.
func (c *Catalog) Digest(ref string) string {
	ref = normalRef(ref)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.digestLocked(ref)
}

// Push publishes a new build of the image under its tag, as a CI pipeline
// pushing a rebuilt image does: later pulls of the tag get a new digest,
// which Digest returns; what the build holds is what the tag holds.
func (c *Catalog) Push(ref string) string {
	ref = normalRef(ref)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.builds[ref]++
	return c.digestLocked(ref)
}

func (c *Catalog) digestLocked(ref string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s#%d", ref, c.builds[ref])))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	repo := ref
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	c.pushedAs[repo+"@"+digest] = ref
	return digest
}

// Known lists the references recorded by name, for messages and docs.
func (c *Catalog) Known() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.exact)+len(c.versioned))
	for ref := range c.exact {
		out = append(out, ref)
	}
	for repo := range c.versioned {
		out = append(out, repo+":<version>")
	}
	sort.Strings(out)
	return out
}

// rootImage finds the image the VMI boots: its first disk by boot order
// (else the first disk), then a container disk's image, or the content a
// claim was filled with (an import's source, copied by every clone).
// It returns "" when the boot disk holds no known content.
func (s *Simulator) rootImage(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	disks := vmi.Spec.Domain.Devices.Disks
	if len(disks) == 0 {
		return "", nil
	}
	boot := disks[0]
	for _, d := range disks {
		if d.BootOrder != nil && (boot.BootOrder == nil || *d.BootOrder < *boot.BootOrder) {
			boot = d
		}
	}
	for _, v := range vmi.Spec.Volumes {
		if v.Name != boot.Name {
			continue
		}
		var claim string
		switch {
		case v.ContainerDisk != nil:
			return v.ContainerDisk.Image, nil
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		default:
			return "", nil
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: claim}, pvc); err != nil {
			return "", err
		}
		return s.content(ctx, pvc)
	}
	return "", nil
}

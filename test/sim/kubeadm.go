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
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// KubeadmRefusedError is kubeadm on a guest refusing to run: the guest
// boots, but never joins its cluster.
type KubeadmRefusedError struct{ Reason string }

func (e *KubeadmRefusedError) Error() string { return e.Reason }

func refused(format string, args ...any) error {
	return &KubeadmRefusedError{Reason: fmt.Sprintf(format, args...)}
}

var (
	// aptPin is an apt install pinned to a package version, as the
	// Kubernetes package repository's install guide writes it.
	aptPin = regexp.MustCompile(`kubeadm=([0-9]+\.[0-9]+\.[0-9]+)`)
	// aptRepo is the Kubernetes package repository of one minor version
	// (pkgs.k8s.io/core:/stable:/v1.34/deb/).
	aptRepo = regexp.MustCompile(`pkgs\.k8s\.io/core:/stable:/(v[0-9]+\.[0-9]+)/`)
	// sysext is Flatcar's Kubernetes system extension image from the
	// sysext-bakery (kubernetes-v1.34.1-x86-64.raw).
	sysext = regexp.MustCompile(`kubernetes-(v[0-9]+\.[0-9]+\.[0-9]+)-x86-64\.raw`)
	// runtimeInstall installs containerd with a package manager.
	runtimeInstall = regexp.MustCompile(`(?:apt-get|apt|dnf|yum)\s+(?:-y\s+)?install\b[^\n"]*\bcontainerd`)
)

// runsKubeadm says whether the bootstrap data runs kubeadm init or join,
// as Cluster API's kubeadm bootstrap provider's data does.
func runsKubeadm(text string) bool {
	return strings.Contains(text, "kubeadm init") || strings.Contains(text, "kubeadm join")
}

// readerOf is the bootstrap agent that reads data of a format.
func readerOf(format string) string {
	if format == "ignition" {
		return "ignition"
	}
	return "cloud-init"
}

// guestKubeadm plays the first boot of an image with bootstrap data that
// runs kubeadm: it returns the version of the kubeadm and kubelet the guest
// then has, or why kubeadm never ran. The image's own packages count, and
// what the data installs (an apt install pinned to a version from the
// Kubernetes package repository, or Flatcar's Kubernetes sysext) replaces
// them (docs/simulator.md#the-image-catalog).
func guestKubeadm(ref string, img Image, known bool, data *Bootstrap, text string) (string, error) {
	name := ref
	if img.OS != "" {
		name = fmt.Sprintf("%s (%s)", ref, img.OS)
	}
	if !known {
		return "", refused("kubeadm: command not found: image %q is not in the simulator's image catalog, so it carries no kubeadm", ref)
	}
	if reader := readerOf(data.Format); img.Reads != reader {
		return "", refused("image %s reads %s, but the VM gives it %s data: nothing in the guest runs it", name, img.Reads, data.Format)
	}
	kube, runtime := img.Kubernetes, img.Runtime
	if m := aptPin.FindStringSubmatch(text); m != nil {
		pinned := "v" + m[1]
		if repo := aptRepo.FindStringSubmatch(text); repo == nil || !strings.HasPrefix(pinned, repo[1]+".") {
			return "", refused("apt-get install: E: Version '%s' for 'kubeadm' was not found: no pkgs.k8s.io repository for %s is configured", m[1], minorOf(pinned))
		}
		kube = pinned
		runtime = runtime || runtimeInstall.MatchString(text)
	} else if m := sysext.FindStringSubmatch(text); m != nil && img.Reads == "ignition" {
		kube = m[1]
	}
	if kube == "" {
		return "", refused("kubeadm: command not found: image %s carries no kubeadm, kubelet or container runtime and the bootstrap data installs none; use a Kubernetes node image (docs/images.md)", name)
	}
	if !runtime {
		return "", refused("kubeadm preflight: [ERROR CRI]: container runtime is not running: image %s has no container runtime and the bootstrap data installs none", name)
	}
	return kube, nil
}

func minorOf(v string) string {
	parsed, err := version.ParseGeneric(v)
	if err != nil {
		return v
	}
	return fmt.Sprintf("v%d.%d", parsed.Major(), parsed.Minor())
}

// CheckVersionSkew is kubeadm's own version checks on a guest whose kubeadm
// and kubelet have version kubelet, asked to run a node of version want:
// "kubeadm init" deploys control planes of its own minor or the one before
// (MinimumControlPlaneVersion) and, like "kubeadm join", refuses a kubelet
// newer than the control plane (the preflight KubeletVersionCheck). See
// kubernetes cmd/kubeadm/app/util/config/common.go and
// cmd/kubeadm/app/preflight/checks.go.
func CheckVersionSkew(kubelet, want string, init bool) error {
	if kubelet == "" || want == "" {
		return nil
	}
	k, err := version.ParseSemantic(kubelet)
	if err != nil {
		return refused("kubeadm: invalid kubelet version %q", kubelet)
	}
	w, err := version.ParseSemantic(want)
	if err != nil {
		return refused("kubeadm: invalid Kubernetes version %q", want)
	}
	if init && k.Minor() > 0 && w.LessThan(version.MajorMinor(k.Major(), k.Minor()-1)) {
		return refused("kubeadm init: this version of kubeadm only supports deploying clusters with the control plane version >= v%d.%d.0. Current version: %s",
			k.Major(), k.Minor()-1, want)
	}
	if k.Major() > w.Major() || k.Minor() > w.Minor() {
		return refused("kubeadm preflight: the kubelet version is higher than the control plane version. This is not a supported version skew and may lead to a malfunctional cluster. Kubelet version: %q Control plane version: %q",
			kubelet, want)
	}
	return nil
}

// bootstrapText is the bootstrap data as text to look for commands in: every
// cloud-init document (multipart parts decoded) or, for Ignition, the config
// and the files it writes from data URLs.
func bootstrapText(data *Bootstrap) string {
	var buf bytes.Buffer
	if data.Format == "ignition" {
		walkIgnition(data.Data, 0, func(cfg *guestIgnition, raw []byte) {
			buf.Write(raw)
			for _, f := range cfg.Storage.Files {
				if b, err := decodeDataURL(f.Contents.Source); err == nil {
					buf.WriteString("\n")
					buf.Write(b)
				}
			}
			buf.WriteString("\n")
		})
		return buf.String()
	}
	walkCloudInit(data.Data, "", nil, 0, func(doc []byte, _ string) {
		buf.Write(doc)
		buf.WriteString("\n")
	})
	return buf.String()
}

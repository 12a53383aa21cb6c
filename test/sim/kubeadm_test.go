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
	"net/url"
	"strings"
	"testing"
)

func TestCatalogLookup(t *testing.T) {
	c := NewCatalog()
	for _, tc := range []struct {
		ref, wantKube string
		known         bool
	}{
		{ref: "docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1", wantKube: "v1.34.1", known: true},
		{ref: "quay.io/capk/ubuntu-2404-container-disk:v1.35.0", wantKube: "v1.35.0", known: true},
		{ref: "quay.io/capk/ubuntu-2404-container-disk:latest", known: false},
		{ref: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img", known: true},
		{ref: "docker://quay.io/containerdisks/ubuntu:24.04", known: true},
		{ref: "https://images.example/ubuntu-2404-kube-v1.33.4.qcow2", wantKube: "v1.33.4", known: true},
		{ref: "https://images.example/ubuntu.qcow2", known: false},
		{ref: "docker://registry.example/flatcar-stable-kube-v1.34.1:4230", wantKube: "v1.34.1", known: true},
		{ref: "", known: false},
	} {
		img, known := c.Lookup(tc.ref)
		if known != tc.known || img.Kubernetes != tc.wantKube {
			t.Errorf("Lookup(%q) = %+v, %v; want Kubernetes %q, known %v", tc.ref, img, known, tc.wantKube, tc.known)
		}
	}
}

func TestGuestKubeadm(t *testing.T) {
	kubeImage := Image{OS: "Ubuntu 24.04", Reads: "cloud-init", Kubernetes: "v1.34.1", Runtime: true}
	stock := Image{OS: "Ubuntu 24.04", Reads: "cloud-init"}
	flatcar := Image{OS: "Flatcar", Reads: "ignition", Runtime: true}
	join := "#cloud-config\nruncmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"
	install := "#cloud-config\nruncmd:\n- echo 'deb https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /' > /etc/apt/sources.list.d/kubernetes.list\n" +
		"- apt-get install -y containerd kubelet=1.34.1-1.1 kubeadm=1.34.1-1.1\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"
	ignitionJoin := `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/kubeadm.sh","contents":{"source":"data:,` +
		url.PathEscape("kubeadm join --config /etc/kubeadm.yml") + `"}}]}}`
	sysextJoin := `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/opt/extensions/kubernetes/kubernetes-v1.34.1-x86-64.raw",` +
		`"contents":{"source":"https://github.com/flatcar/sysext-bakery/releases/download/kubernetes-v1.34.1/kubernetes-v1.34.1-x86-64.raw"}},` +
		`{"path":"/etc/kubeadm.sh","contents":{"source":"data:,kubeadm%20join"}}]}}`
	for _, tc := range []struct {
		name, format, data string
		img                Image
		known              bool
		want, wantErr      string
	}{
		{name: "image with kubeadm", img: kubeImage, known: true, format: "cloud-config", data: join, want: "v1.34.1"},
		{name: "unknown image", known: false, format: "cloud-config", data: join, wantErr: "not in the simulator's image catalog"},
		{name: "stock image", img: stock, known: true, format: "cloud-config", data: join, wantErr: "kubeadm: command not found"},
		{name: "stock image, installs", img: stock, known: true, format: "cloud-config", data: install, want: "v1.34.1"},
		{name: "installs from the wrong repository", img: stock, known: true, format: "cloud-config",
			data:    "#cloud-config\nruncmd:\n- echo 'deb https://pkgs.k8s.io/core:/stable:/v1.33/deb/ /'\n- apt-get install -y containerd kubeadm=1.34.1-1.1\n- kubeadm join\n",
			wantErr: "Version '1.34.1' for 'kubeadm' was not found"},
		{name: "installs kubeadm but no runtime", img: stock, known: true, format: "cloud-config",
			data:    "#cloud-config\nruncmd:\n- echo pkgs.k8s.io/core:/stable:/v1.34/deb/\n- apt-get install -y kubeadm=1.34.1-1.1\n- kubeadm join\n",
			wantErr: "container runtime is not running"},
		{name: "Ignition to a cloud-init image", img: kubeImage, known: true, format: "ignition", data: ignitionJoin, wantErr: "reads cloud-init"},
		{name: "stock Flatcar", img: flatcar, known: true, format: "ignition", data: ignitionJoin, wantErr: "kubeadm: command not found"},
		{name: "Flatcar with the Kubernetes sysext", img: flatcar, known: true, format: "ignition", data: sysextJoin, want: "v1.34.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := &Bootstrap{Format: tc.format, Data: []byte(tc.data)}
			text := bootstrapText(data)
			if !runsKubeadm(text) {
				t.Fatalf("the data runs no kubeadm: %q", text)
			}
			got, err := guestKubeadm("ref", tc.img, tc.known, data, text)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected refusal: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %q, %v; want an error with %q", got, err, tc.wantErr)
			case got != tc.want:
				t.Fatalf("kubelet %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckVersionSkew(t *testing.T) {
	for _, tc := range []struct {
		kubelet, want string
		init          bool
		ok            bool
	}{
		{kubelet: "v1.34.1", want: "v1.34.1", init: true, ok: true},
		{kubelet: "v1.34.3", want: "v1.34.1", init: true, ok: true},
		{kubelet: "v1.35.0", want: "v1.34.1", init: true},
		{kubelet: "v1.35.0", want: "v1.33.0", init: true},
		{kubelet: "v1.35.0", want: "v1.34.1"},
		{kubelet: "v1.33.2", want: "v1.34.1", ok: true},
		{kubelet: "v1.34.1", want: "", ok: true},
	} {
		err := CheckVersionSkew(tc.kubelet, tc.want, tc.init)
		if (err == nil) != tc.ok {
			t.Errorf("CheckVersionSkew(%s, %s, init=%v) = %v, want ok=%v", tc.kubelet, tc.want, tc.init, err, tc.ok)
		}
	}
}

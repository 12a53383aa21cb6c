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
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The container's process combines the image and the pod spec as the
// kubelet does, and runs only what the image holds.
func TestContainerProcess(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "manager"), []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	img := &podImage{root: root, config: v1.Config{Entrypoint: []string{"/manager"}, Cmd: []string{"--default"}, Env: []string{"PATH=/"}}}
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		args    []string
		wantErr string
	}{
		{name: "the image's entrypoint and cmd", args: []string{"--default"}},
		{name: "arguments replace cmd", c: corev1.Container{Args: []string{"--v=2"}}, args: []string{"--v=2"}},
		{name: "a command replaces entrypoint and cmd", c: corev1.Container{Command: []string{"/manager", "--x"}}, args: []string{"--x"}},
		{name: "a file the image lacks", c: corev1.Container{Command: []string{"/bin/manager"}}, wantErr: "the image has no executable /bin/manager"},
		{name: "a relative command", c: corev1.Container{Command: []string{"manager"}}, wantErr: "an absolute path of the image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path, args, env, err := containerProcess(img, &tc.c)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(path).To(Equal(filepath.Join(root, "manager")))
			g.Expect(args).To(Equal(tc.args))
			g.Expect(env).To(Equal([]string{"PATH=/"}))
		})
	}
}

// A container runs as its securityContext's user, else the pod's, else
// the image's, and not as root when it must not.
func TestRunAs(t *testing.T) {
	img := &podImage{config: v1.Config{User: "65532:65533"}}
	for _, tc := range []struct {
		name     string
		pod      *corev1.PodSecurityContext
		c        *corev1.SecurityContext
		img      *podImage
		uid, gid uint32
		wantErr  string
	}{
		{name: "the image's user", img: img, uid: 65532, gid: 65533},
		{name: "the pod's user, of group 0", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}, img: img, uid: 1000, gid: 0},
		{name: "the image's own user keeps its group", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)}, img: img, uid: 65532, gid: 65533},
		{name: "the container's over the pod's", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			c: &corev1.SecurityContext{RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](2001)}, img: img, uid: 2000, gid: 2001},
		{name: "an image without a user runs as root", img: &podImage{}, uid: 0, gid: 0},
		{name: "root refused when it must not", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, img: &podImage{},
			wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "a user name", img: &podImage{config: v1.Config{User: "nonroot"}}, wantErr: "not numeric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: tc.pod}}
			uid, gid, err := runAs(pod, &corev1.Container{SecurityContext: tc.c}, tc.img)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]uint32{uid, gid}).To(Equal([]uint32{tc.uid, tc.gid}))
		})
	}
}

// An image by digest must be in the layout; one by tag may be missing,
// and the runner then runs its own binary.
func TestImageStoreResolve(t *testing.T) {
	g := NewWithT(t)
	store := &imageStore{layout: t.TempDir(), dir: t.TempDir()}
	_, err := store.resolve("ghcr.io/capkv/manager@sha256:0123")
	g.Expect(err).To(MatchError(errNoImage))
	_, err = (&imageStore{}).resolve("ghcr.io/capkv/manager:v1")
	g.Expect(err).To(MatchError(errNoImage))
}

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
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
)

// imageStore is the world's container runtime for the provider's image:
// it finds a container's image in an OCI image layout (make image writes
// out/image), by digest or by the tag it was written with, and unpacks
// this machine's platform of it once, so that the pod runs the image's
// own files as the image says to.
type imageStore struct {
	layout string
	dir    string

	mu       sync.Mutex
	unpacked map[v1.Hash]*podImage
}

// podImage is an unpacked image: its file system and its config.
type podImage struct {
	root   string
	config v1.Config
}

// errNoImage says an image reference is not in the layout.
var errNoImage = errors.New("not in the image layout")

// resolve finds and unpacks the image ref names.
func (s *imageStore) resolve(ref string) (*podImage, error) {
	if s == nil || s.layout == "" {
		return nil, errNoImage
	}
	path, err := layout.FromPath(s.layout)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errNoImage, s.layout, err)
	}
	top, err := path.ImageIndex()
	if err != nil {
		return nil, err
	}
	manifest, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	name, digest, byDigest := strings.Cut(ref, "@")
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	for _, d := range manifest.Manifests {
		if byDigest && d.Digest.String() != digest || !byDigest && d.Annotations["org.opencontainers.image.ref.name"] != tag {
			continue
		}
		index, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		return s.platform(index, ref)
	}
	return nil, fmt.Errorf("image %s: %w %s", ref, errNoImage, s.layout)
}

// platform unpacks this machine's image of the index.
func (s *imageStore) platform(index v1.ImageIndex, ref string) (*podImage, error) {
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range manifest.Manifests {
		if d.Platform == nil || d.Platform.OS != runtime.GOOS || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if img, ok := s.unpacked[d.Digest]; ok {
			return img, nil
		}
		img, err := index.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		root := filepath.Join(s.dir, d.Digest.Hex)
		if err := unpack(img, root); err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w", ref, err)
		}
		if s.unpacked == nil {
			s.unpacked = map[v1.Hash]*podImage{}
		}
		s.unpacked[d.Digest] = &podImage{root: root, config: cfg.Config}
		return s.unpacked[d.Digest], nil
	}
	return nil, fmt.Errorf("image %s has no %s/%s image, as a kubelet on this machine would find (no matching manifest)", ref, runtime.GOOS, runtime.GOARCH)
}

// unpack writes the image's flattened file system under root, as the
// container runtime would: regular files and directories with their
// modes (readable by the image's user), nothing outside root.
func unpack(img v1.Image, root string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil { //nolint:gosec // the image's files, for its user to read
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil { //nolint:gosec // as above
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(h.Mode).Perm()) //nolint:gosec // a path inside root, cleaned
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr) //nolint:gosec // the provider's own image, built by make image
			if err := errors.Join(err, f.Close()); err != nil {
				return err
			}
		}
	}
}

// containerProcess is what the runtime starts for a container of img, as
// the kubelet combines them: the container's command replaces the image's
// entrypoint (and its arguments then the image's cmd), its arguments the
// image's cmd; the image's environment comes first.
func containerProcess(img *podImage, c *corev1.Container) (path string, args, env []string, err error) {
	cmd, cmdArgs := img.config.Entrypoint, img.config.Cmd
	if len(c.Command) > 0 {
		cmd, cmdArgs = c.Command, nil
	}
	if len(c.Args) > 0 {
		cmdArgs = c.Args
	}
	if len(cmd) == 0 || !filepath.IsAbs(cmd[0]) {
		return "", nil, nil, fmt.Errorf("the image runs %q: the world runs an absolute path of the image", cmd)
	}
	path = filepath.Join(img.root, filepath.Clean(cmd[0]))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm()&0o111 == 0 {
		return "", nil, nil, fmt.Errorf("the image has no executable %s (%v)", cmd[0], err) //nolint:errorlint // err may be nil: a file without x bits
	}
	return path, append(append([]string{}, cmd[1:]...), cmdArgs...), img.config.Env, nil
}

// runAs is the user and group a container runs as: the container's
// securityContext, else the pod's, else the image's user (numeric
// uid[:gid]; a name would need the image's /etc/passwd), with group 0
// where none is given. The kubelet refuses a container that must not run
// as root but would.
func runAs(pod *corev1.Pod, c *corev1.Container, img *podImage) (uid, gid uint32, err error) {
	var u, g *int64
	nonRoot := false
	if sc := pod.Spec.SecurityContext; sc != nil {
		u, g, nonRoot = sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	// The image's user, and its group when the runtime takes it from
	// there: for the image's own user, without a group of the pod's.
	var imgUID, imgGID *int64
	if img.config.User != "" {
		user, group, _ := strings.Cut(img.config.User, ":")
		n, err := strconv.ParseInt(user, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("the image's user %q is not numeric", img.config.User)
		}
		imgUID = &n
		if group != "" {
			m, err := strconv.ParseInt(group, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("the image's group %q is not numeric", img.config.User)
			}
			imgGID = &m
		}
	}
	if u == nil {
		u = imgUID
	}
	if u == nil {
		u = new(int64)
	}
	if g == nil && imgUID != nil && *imgUID == *u {
		g = imgGID
	}
	if g == nil {
		g = new(int64)
	}
	if nonRoot && *u == 0 {
		return 0, 0, errors.New("container has runAsNonRoot and image will run as root")
	}
	return uint32(*u), uint32(*g), nil
}

// giveTo hands the container's directory to the user it runs as, as the
// kubelet sets the ownership of a pod's volumes, and lets it pass through
// the runner's own directory, top, above it.
func giveTo(dir, top string, uid, gid uint32) error {
	for parent := filepath.Dir(dir); strings.HasPrefix(parent, top); parent = filepath.Dir(parent) {
		st, err := os.Stat(parent)
		if err != nil {
			return err
		}
		if err := os.Chmod(parent, st.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(uid), int(gid)) //nolint:gosec // the runner's own directory, written by it alone
	})
}

// Process is a running container's process as the host sees it.
type Process struct {
	// Pod is the pod's name.
	Pod string
	// Executable is the file the process runs.
	Executable string
	// UID and GID are its real user and group.
	UID, GID string
}

// Processes reads, from /proc, what each running container's process runs
// and as whom.
func (r *PodRunner) Processes() ([]Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Process
	for key, ctr := range r.pods {
		if ctr.proc == nil || ctr.proc.done() {
			continue
		}
		pid := strconv.Itoa(ctr.proc.cmd.Process.Pid)
		exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
		if err != nil {
			return nil, err
		}
		status, err := os.ReadFile(filepath.Join("/proc", pid, "status")) //nolint:gosec // a path of /proc
		if err != nil {
			return nil, err
		}
		p := Process{Pod: key.Name, Executable: exe}
		for line := range strings.SplitSeq(string(status), "\n") {
			// Uid: real, effective, saved, file system.
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				p.UID = f[1]
			} else if len(f) > 1 && f[0] == "Gid:" {
				p.GID = f[1]
			}
		}
		out = append(out, p)
	}
	return out, nil
}

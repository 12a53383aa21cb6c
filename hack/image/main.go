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

// Command image builds the manager's OCI image without a container engine
// (make image, docs/install.md#the-image): the manager cross-compiled for
// each platform, static and stripped of nothing but paths, on an empty
// base with a non-root user, written as an OCI image layout with an
// in-toto provenance statement beside it.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, the number distroless and most scanners
// expect of "nonroot".
const (
	uid  = 65532
	user = "nonroot"
)

// Labels are the OCI annotations the image's config carries.
const (
	labelTitle    = "org.opencontainers.image.title"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelCreated  = "org.opencontainers.image.created"
	labelLicenses = "org.opencontainers.image.licenses"
	labelRefName  = "org.opencontainers.image.ref.name"
)

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "the provider's source tree")
	flag.StringVar(&o.out, "out", "out/image", "the OCI image layout to write (replaced)")
	flag.StringVar(&o.version, "version", "dev", "the release version, compiled in and labelled")
	flag.StringVar(&o.ldflags, "ldflags", "", "linker flags of the manager, as make build passes them")
	flag.StringVar(&o.repository, "repository", "ghcr.io/capkv/cluster-api-provider-kubevirt", "where the image is meant to be pushed, for the provenance")
	flag.StringVar(&o.source, "source", "https://github.com/capkv/cluster-api-provider-kubevirt", "the source repository, labelled")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the platforms, comma-separated")
	flag.Parse()
	for _, p := range strings.Split(*platforms, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			fail(fmt.Errorf("platform %q is not os/arch", p))
		}
		o.platforms = append(o.platforms, v1.Platform{OS: os, Architecture: arch})
	}
	digest, err := build(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s@%s\n", o.repository, digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "make image:", err)
	os.Exit(1)
}

type options struct {
	root, out, version, ldflags, repository, source string
	platforms                                       []v1.Platform
}

// build writes the image index of every platform into the layout at
// o.out and the provenance beside it, and returns the index's digest.
func build(o options) (v1.Hash, error) {
	revision, created, err := commit(o.root)
	if err != nil {
		return v1.Hash{}, err
	}
	labels := map[string]string{
		labelTitle: "cluster-api-provider-kubevirt", labelVersion: o.version, labelRevision: revision,
		labelSource: o.source, labelCreated: created.UTC().Format(time.RFC3339), labelLicenses: "Apache-2.0",
	}
	base, err := baseLayer(created)
	if err != nil {
		return v1.Hash{}, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, err := platformImage(o, p, base, labels, created)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	index = mutate.Annotations(index, map[string]string{labelVersion: o.version, labelRevision: revision, labelSource: o.source}).(v1.ImageIndex)
	if err := os.RemoveAll(o.out); err != nil {
		return v1.Hash{}, err
	}
	path, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := path.AppendIndex(index, layout.WithAnnotations(map[string]string{labelRefName: o.version})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the layout: %w", err)
	}
	digest, err := index.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	return digest, writeProvenance(o, index, revision)
}

// platformImage is the image of one platform: the base layer, then the
// manager built for it.
func platformImage(o options, p v1.Platform, base v1.Layer, labels map[string]string, created time.Time) (v1.Image, error) {
	binary, err := compile(o, p)
	if err != nil {
		return nil, err
	}
	managerLayer, err := layer(created, []entry{{name: "manager", mode: 0o555, data: binary}})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, managerLayer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: created}
	cfg.Author = "CAPKV make image"
	cfg.Config = v1.Config{
		User:       strconv.Itoa(uid) + ":" + strconv.Itoa(uid),
		Entrypoint: []string{"/manager"},
		WorkingDir: "/",
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cfg)
}

// compile builds the manager for p as make build does (static,
// -trimpath), with the version compiled in.
func compile(o options, p v1.Platform) ([]byte, error) {
	dir, err := os.MkdirTemp("", "capkv-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "manager")
	ldflags := strings.TrimSpace(o.ldflags + " -X github.com/capkv/cluster-api-provider-kubevirt/pkg/common/version.Version=" + o.version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".") //nolint:gosec // the make target's own flags
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	return os.ReadFile(out) //nolint:gosec // the file just built, in a directory of its own
}

// baseLayer is what the image has besides the manager: the user and its
// group, and a writable /tmp.
func baseLayer(created time.Time) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", user, uid, uid, user, user)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", user, uid)
	return layer(created, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/" + user + "/", mode: 0o700, dir: true, owner: uid},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
}

// entry is a file or directory of a layer.
type entry struct {
	name  string
	mode  int64
	dir   bool
	owner int
	data  []byte
}

// layer is a gzipped tar of entries, every time stamp the commit's, so
// that the same commit gives the same digests.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// commit is the source tree's commit and its time; a tree with changes
// not committed says so in the revision.
func commit(root string) (string, time.Time, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...) //nolint:gosec // fixed git queries
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	revision, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading the commit (make image builds from a git checkout): %w", err)
	}
	seconds, err := git("log", "-1", "--format=%ct")
	if err != nil {
		return "", time.Time{}, err
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		seconds = s
	}
	n, err := strconv.ParseInt(seconds, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("commit time %q: %w", seconds, err)
	}
	if status, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
		revision += "-dirty"
	}
	return revision, time.Unix(n, 0).UTC(), nil
}

// writeProvenance writes an in-toto statement of SLSA provenance v1 for
// the index and each platform's image beside the layout
// (<out>.provenance.json): what was built, from which commit, with which
// Go, so that a user can check a pushed image against its source.
func writeProvenance(o options, index v1.ImageIndex, revision string) error {
	manifest, err := index.IndexManifest()
	if err != nil {
		return err
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	subjects := []map[string]any{{"name": o.repository + ":" + o.version, "digest": map[string]string{"sha256": digest.Hex}}}
	for _, m := range manifest.Manifests {
		subjects = append(subjects, map[string]any{
			"name":   fmt.Sprintf("%s:%s (%s/%s)", o.repository, o.version, m.Platform.OS, m.Platform.Architecture),
			"digest": map[string]string{"sha256": m.Digest.Hex},
		})
	}
	var platforms []string
	for _, p := range o.platforms {
		platforms = append(platforms, p.OS+"/"+p.Architecture)
	}
	statement := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       subjects,
		"predicateType": "https://slsa.dev/provenance/v1",
		"predicate": map[string]any{
			"buildDefinition": map[string]any{
				"buildType":          "https://github.com/capkv/cluster-api-provider-kubevirt/hack/image@v1",
				"externalParameters": map[string]any{"version": o.version, "platforms": platforms, "source": o.source},
				"internalParameters": map[string]any{"goVersion": runtime.Version(), "cgo": false, "trimpath": true},
				"resolvedDependencies": []map[string]any{{
					"uri": "git+" + o.source, "digest": map[string]string{"gitCommit": strings.TrimSuffix(revision, "-dirty")},
					"annotations": map[string]any{"dirty": strings.HasSuffix(revision, "-dirty")},
				}},
			},
			"runDetails": map[string]any{
				"builder": map[string]any{"id": "https://github.com/capkv/cluster-api-provider-kubevirt/hack/image"},
			},
		},
	}
	data, err := json.MarshalIndent(statement, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(o.out, "/")+".provenance.json", append(data, '\n'), 0o644) //nolint:gosec // published beside the image, for anyone to read
}

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSpec is one image: the layout directory and repository name, the binary and its package.
type imageSpec struct {
	Name    string
	Binary  string
	Package string
}

var images = []imageSpec{
	{Name: "manager", Binary: "sidecarops-manager", Package: "./cmd/sidecarops-manager"},
	{Name: "agent", Binary: "sidecar-agent", Package: "./cmd/sidecar-agent"},
}

// platform is a GOARCH; every image is linux.
type platform struct {
	Arch string
	// Env pins the instruction-set level, which GOAMD64/GOARM64 in the builder's environment would
	// otherwise change, and with it the binary and the digest.
	Env string
}

var platforms = []platform{
	{Arch: "amd64", Env: "GOAMD64=v1"},
	{Arch: "arm64", Env: "GOARM64=v8.0"},
}

const (
	// nonroot is distroless' unprivileged user, which the manifests' runAsNonRoot accepts because it is
	// numeric.
	nonroot    = "65532"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
	binDir     = "usr/local/bin"
	sourceURL  = "https://github.com/sidecarops/sidecarops"
	modulePath = "github.com/sidecarops/sidecarops"
	refNameKey = "org.opencontainers.image.ref.name"
	// defaultRegistry is where the images are published; REGISTRY/manager and REGISTRY/agent are their
	// names in every manifest of the repository (a test refuses any other).
	defaultRegistry = "ghcr.io/sidecarops"
)

type options struct {
	Version, Commit string
	Epoch           time.Time
	CABundle        string
	Root            string
	Out             string
	Registry        string
	Go              string
	Images          []imageSpec
	Platforms       []platform
}

// built is one image index as written.
type built struct {
	Repository, Tag string
	Digest          v1.Hash
}

// repository is an image's name under a registry prefix: ghcr.io/sidecarops/manager.
func repository(registry string, spec imageSpec) string {
	return strings.TrimSuffix(registry, "/") + "/" + spec.Name
}

// Ref names the image by tag and digest: the digest is what a node pulls, the tag what a reader sees.
func (b built) Ref() string {
	return fmt.Sprintf("%s:%s@%s", b.Repository, b.Tag, b.Digest)
}

func build(ctx context.Context, o options) ([]built, error) {
	if strings.ContainsFunc(o.Commit, unicode.IsSpace) {
		return nil, fmt.Errorf("--commit %q: contains white space, which -ldflags -X cannot carry", o.Commit)
	}
	// The version becomes the tag, so it must be one: checked before minutes of building.
	for _, spec := range o.Images {
		if _, err := name.NewTag(repository(o.Registry, spec) + ":" + o.Version); err != nil {
			return nil, fmt.Errorf("image %s: --registry %q and --version %q do not make an image name: %w", spec.Name, o.Registry, o.Version, err)
		}
	}
	licence, err := spdxID(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	bins, err := os.MkdirTemp("", "sidecarops-images-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory for the binaries: %w", err)
	}
	defer func() { _ = os.RemoveAll(bins) }()

	labels := map[string]string{
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Commit,
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.licenses": licence,
		"org.opencontainers.image.created":  o.Epoch.UTC().Format(time.RFC3339),
	}
	var out []built
	for _, spec := range o.Images {
		var exes []string
		for _, p := range o.Platforms {
			bin := filepath.Join(bins, spec.Binary+"-"+p.Arch)
			if err := goBuild(ctx, o, spec, p, bin); err != nil {
				return nil, err
			}
			exes = append(exes, bin)
		}
		annotated, err := imageIndex(o, spec, exes, ca, labels)
		if err != nil {
			return nil, err
		}
		digest, err := writeLayout(filepath.Join(o.Out, spec.Name), annotated, o.Version)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Name, err)
		}
		out = append(out, built{Repository: repository(o.Registry, spec), Tag: o.Version, Digest: digest})
	}
	var lines strings.Builder
	for _, b := range out {
		fmt.Fprintln(&lines, b.Ref())
	}
	digests := filepath.Join(o.Out, "digests.txt")
	if err := os.WriteFile(digests, []byte(lines.String()), 0o644); err != nil { //nolint:gosec // G306: digests.txt is public, like the images it names
		return nil, fmt.Errorf("%s: %w", digests, err)
	}
	return out, nil
}

// imageIndex is the image for every platform of o.Platforms, from its binary in exes (in the same
// order), under one index that carries the labels as annotations.
func imageIndex(o options, spec imageSpec, exes []string, ca []byte, labels map[string]string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, p := range o.Platforms {
		img, err := platformImage(o, spec, p, exes[i], ca, labels)
		if err != nil {
			return nil, fmt.Errorf("image %s linux/%s: %w", spec.Name, p.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: p.Arch}},
		})
	}
	annotated, ok := mutate.Annotations(idx, labels).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("image %s: annotating the index did not give an index", spec.Name)
	}
	return annotated, nil
}

// goBuild builds a static binary with nothing of the build machine in it: no cgo, no paths
// (-trimpath), no VCS state (the commit is stamped instead) and no build ID, which hashes inputs
// that the binary does not otherwise depend on.
func goBuild(ctx context.Context, o options, spec imageSpec, p platform, bin string) error {
	ldflags := fmt.Sprintf("-X %[1]s/internal/version.Version=%[2]s -X %[1]s/internal/version.Commit=%[3]s -buildid=",
		modulePath, o.Version, o.Commit)
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, spec.Package) //nolint:gosec // G204: the go command and arguments are the builder's own
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+p.Arch, p.Env)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image %s linux/%s: go build %s: %w\n%s", spec.Name, p.Arch, spec.Package, err, out)
	}
	return nil
}

func platformImage(o options, spec imageSpec, p platform, bin string, ca []byte, labels map[string]string) (v1.Image, error) {
	exe, err := os.ReadFile(bin) //nolint:gosec // G304: the binary goBuild just wrote
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	layer, err := rootfsLayer(o.Epoch, spec.Binary, exe, ca)
	if err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.Epoch},
		Config: v1.Config{
			User:       nonroot + ":" + nonroot,
			Entrypoint: []string{"/" + binDir + "/" + spec.Binary},
			Env: []string{
				"PATH=/" + binDir,
				// Go reads this file first on Linux anyway; naming it keeps the bundle found if Go's
				// search list changes.
				"SSL_CERT_FILE=/" + caPath,
			},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: o.Epoch},
			CreatedBy: "hack/images: " + spec.Package + ", the CA bundle, /etc/passwd and /etc/group",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	return img, nil
}

// rootfsLayer is the image's only layer. Its bytes depend on the inputs alone: entries sorted, every
// time the source date, owner root, no user or group names, and gzip (with a zero header time) done
// here rather than left to go-containerregistry, whose compression level could change with a bump.
// Go's default level: the best compression is much slower on the manager's binary and saves next to nothing.
func rootfsLayer(epoch time.Time, binary string, exe, ca []byte) (v1.Layer, error) {
	type entry struct {
		name string
		mode int64
		body []byte
	}
	dir := func(n string) entry { return entry{name: n + "/", mode: 0o755} }
	entries := []entry{
		dir("etc"), dir("etc/ssl"), dir("etc/ssl/certs"), dir("usr"), dir("usr/local"), dir(binDir),
		{name: caPath, mode: 0o644, body: ca},
		// The home directory does not exist: the root file system is read-only and nothing writes one.
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + nonroot + ":" + nonroot + ":nonroot:/nonexistent:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnonroot:x:" + nonroot + ":\n")},
		{name: binDir + "/" + binary, mode: 0o755, body: exe},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("layer: gzip: %w", err)
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatUSTAR}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("layer: gzip: %w", err)
	}
	gz := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}

// writeLayout replaces dir with an OCI layout whose index.json names the image index by its tag.
// A new directory each time: layout.AppendIndex adds to index.json, so a stale layout would keep the
// previous build's entry beside this one.
func writeLayout(dir string, idx v1.ImageIndex, tag string) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, fmt.Errorf("removing the previous layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameKey: tag})); err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: writing the index: %w", dir, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: index digest: %w", dir, err)
	}
	return digest, nil
}

// spdxID tells the licence from the LICENSE file's own words, so that the label cannot drift from it.
func spdxID(path string) (string, error) {
	text, err := os.ReadFile(path) //nolint:gosec // G304: the repository's LICENSE
	if err != nil {
		return "", fmt.Errorf("licence label: %w", err)
	}
	known := []struct{ id, first, second string }{
		{id: "Apache-2.0", first: "Apache License", second: "Version 2.0, January 2004"},
		{id: "MIT", first: "MIT License", second: "Permission is hereby granted, free of charge"},
	}
	for _, k := range known {
		if bytes.Contains(text, []byte(k.first)) && bytes.Contains(text, []byte(k.second)) {
			return k.id, nil
		}
	}
	return "", fmt.Errorf("licence label: %s: not a licence this builder recognises (Apache-2.0, MIT)", path)
}

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testVersion = "v9.8.7-test.1"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testEpoch   = 1700000000
	testCA      = "-----BEGIN CERTIFICATE-----\nnot a real certificate: the test's own bundle\n-----END CERTIFICATE-----\n"
)

// TestImagesAreReproducible builds both images twice, as `make images` does, in two directories, and
// reads what it wrote: the same index digests, digests.txt naming them by tag and digest, valid OCI
// layouts, and in every platform's image the config and files the issue asks for. It then runs the
// binaries taken out of the linux/amd64 images.
func TestImagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager and the agent four times each")
	}
	ctx := context.Background()
	tmp := t.TempDir()
	ca := filepath.Join(tmp, "ca.crt")
	require.NoError(t, os.WriteFile(ca, []byte(testCA), 0o600))

	// The builder runs as `make images` runs it, in a process of its own: not instrumented by
	// `go test -race`, which would make compressing the manager's layer many times slower.
	builder := filepath.Join(tmp, "images")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", builder, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	var digests [2]string
	dirs := [2]string{filepath.Join(tmp, "first"), filepath.Join(tmp, "second")}
	for i, dir := range dirs {
		start := time.Now()
		cmd := exec.CommandContext(ctx, builder, "--version", testVersion, "--commit", testCommit,
			"--epoch", strconv.Itoa(testEpoch), "--ca-bundle", ca, "--out", dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		require.NoError(t, err, "build %d: %s", i+1, stderr.String())
		t.Logf("build %d: %s", i+1, time.Since(start).Round(time.Second))
		written, err := os.ReadFile(filepath.Join(dir, "digests.txt"))
		require.NoError(t, err)
		assert.Equal(t, string(stdout), string(written), "the builder prints digests.txt")
		digests[i] = string(written)
	}
	require.Equal(t, digests[0], digests[1], "two builds of the same inputs give the same digests")

	lines := strings.Split(strings.TrimSuffix(digests[0], "\n"), "\n")
	require.Len(t, lines, len(images))
	for i, spec := range images {
		t.Run(spec.Name, func(t *testing.T) {
			ref := "ghcr.io/sidecarops/" + spec.Name + ":" + testVersion + "@"
			require.True(t, strings.HasPrefix(lines[i], ref+"sha256:"), "digests.txt line %q, want %ssha256:…", lines[i], ref)
			want, err := v1.NewHash(strings.TrimPrefix(lines[i], ref))
			require.NoError(t, err)
			checkImage(t, filepath.Join(dirs[0], spec.Name), spec, want)
		})
	}
}

func checkImage(t *testing.T, dir string, spec imageSpec, want v1.Hash) {
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := p.ImageIndex()
	require.NoError(t, err)
	topManifest, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, topManifest.Manifests, 1, "index.json holds the one image index")
	assert.Equal(t, want, topManifest.Manifests[0].Digest, "digests.txt names the layout's index")
	assert.Equal(t, testVersion, topManifest.Manifests[0].Annotations[refNameKey], "the layout tags the index with the version")

	idx, err := top.ImageIndex(want)
	require.NoError(t, err)
	// Fast: the layers' bytes are hashed below, outside go-containerregistry's decompression, which
	// -race makes slow.
	require.NoError(t, validate.Index(idx, validate.Fast), "the index is valid OCI")
	manifest, err := idx.IndexManifest()
	require.NoError(t, err)
	labels := map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testCommit,
		"org.opencontainers.image.source":   "https://github.com/sidecarops/sidecarops",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	}
	assert.Equal(t, labels, manifest.Annotations, "the index carries the labels as annotations")

	var arches []string
	for _, desc := range manifest.Manifests {
		require.NotNil(t, desc.Platform)
		arch := desc.Platform.Architecture
		arches = append(arches, desc.Platform.OS+"/"+arch)
		t.Run(arch, func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			require.NoError(t, err)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, "linux", cfg.OS)
			assert.Equal(t, arch, cfg.Architecture)
			assert.Equal(t, "65532:65532", cfg.Config.User)
			assert.Equal(t, []string{"/usr/local/bin/" + spec.Binary}, cfg.Config.Entrypoint)
			assert.Empty(t, cfg.Config.Cmd)
			assert.Contains(t, cfg.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
			assert.Equal(t, labels, cfg.Config.Labels)
			assert.True(t, cfg.Created.Equal(time.Unix(testEpoch, 0)), "created %s", cfg.Created)

			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 1, "no base image: one layer")
			checkDigest(t, layers[0])
			require.Len(t, cfg.RootFS.DiffIDs, 1)
			files := readLayer(t, layers[0], cfg.RootFS.DiffIDs[0])
			assert.Equal(t, testCA, string(files["etc/ssl/certs/ca-certificates.crt"].body))
			assert.Contains(t, string(files["etc/passwd"].body), "nonroot:x:65532:65532:")
			assert.Contains(t, string(files["etc/group"].body), "nonroot:x:65532:")
			for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"} {
				assert.NotContains(t, files, shell, "no shell")
			}
			bin, ok := files["usr/local/bin/"+spec.Binary]
			require.True(t, ok, "the binary is at /usr/local/bin/%s", spec.Binary)
			assert.Equal(t, int64(0o755), bin.mode)
			checkStatic(t, bin.body, arch)
			if arch == runtime.GOARCH && runtime.GOOS == "linux" {
				runVersion(t, spec.Binary, bin.body)
			}
		})
	}
	assert.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, arches)
}

type file struct {
	mode int64
	body []byte
}

// checkDigest: the layer's blob is what its manifest says.
func checkDigest(t *testing.T, layer v1.Layer) {
	want, err := layer.Digest()
	require.NoError(t, err)
	rc, err := layer.Compressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	got, _, err := v1.SHA256(rc)
	require.NoError(t, err)
	assert.Equal(t, want, got, "layer blob digest")
}

// readLayer checks the layer's diff ID, and what makes the layer reproducible: sorted names, the
// source date, owner root.
func readLayer(t *testing.T, layer v1.Layer, diffID v1.Hash) map[string]file {
	rc, err := layer.Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	hash := sha256.New()
	tr := tar.NewReader(io.TeeReader(rc, hash))
	files := map[string]file{}
	previous := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		assert.Less(t, previous, h.Name, "entries are sorted")
		previous = h.Name
		assert.Equal(t, int64(testEpoch), h.ModTime.Unix(), "%s: mtime", h.Name)
		assert.Zero(t, h.Uid, "%s: uid", h.Name)
		assert.Zero(t, h.Gid, "%s: gid", h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = file{mode: h.Mode, body: body}
	}
	// The tar's end-of-archive padding is part of the diff ID but not read by tr.Next.
	_, err = io.Copy(hash, rc)
	require.NoError(t, err)
	assert.Equal(t, diffID.Hex, hex.EncodeToString(hash.Sum(nil)), "layer diff ID")
	return files
}

// checkStatic: a binary with no ELF interpreter needs no libc, which the image does not have.
func checkStatic(t *testing.T, exe []byte, arch string) {
	f, err := elf.NewFile(bytes.NewReader(exe))
	require.NoError(t, err)
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	assert.Equal(t, machine, f.Machine, "the binary is built for %s", arch)
	for _, prog := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, prog.Type, "the binary is static")
	}
}

func runVersion(t *testing.T, binary string, exe []byte) {
	path := filepath.Join(t.TempDir(), binary)
	require.NoError(t, os.WriteFile(path, exe, 0o700))
	out, err := exec.CommandContext(context.Background(), path, "--version").CombinedOutput()
	require.NoError(t, err, "%s --version: %s", binary, out)
	assert.Contains(t, string(out), binary+" "+testVersion+" (commit "+testCommit+",")
}

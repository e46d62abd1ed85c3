package main

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

const (
	testVersion = "v9.8.7-test.1"
	testRepo    = "registry.example.com/platform/sidecarctl"
)

// goBuild builds a Go program as make images does (static, -trimpath) for linux/arch.
func goBuild(t *testing.T, dir, pkg, arch string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	cmd := exec.CommandContext(context.Background(), "go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// imageLayout writes an image index as make images does: one image per platform whose entrypoint
// is the binary given for it, the version and creation time as the index's annotations, tagged with
// the version.
func imageLayout(t *testing.T, exes map[string]string) (string, v1.Hash) {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for arch, exe := range exes {
		body, err := os.ReadFile(exe)
		require.NoError(t, err)
		layer, err := crane.Layer(map[string][]byte{"usr/local/bin/sidecarctl": body})
		require.NoError(t, err)
		img, err := mutate.AppendLayers(empty.Image, layer)
		require.NoError(t, err)
		img, err = mutate.Config(img, v1.Config{Entrypoint: []string{"/usr/local/bin/sidecarctl"}})
		require.NoError(t, err)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	annotated, ok := mutate.Annotations(idx, map[string]string{
		versionKey: testVersion,
		createdKey: time.Unix(testEpoch, 0).UTC().Format(time.RFC3339),
	}).(v1.ImageIndex)
	require.True(t, ok)
	dir := filepath.Join(t.TempDir(), "image")
	p, err := layout.Write(dir, empty.Index)
	require.NoError(t, err)
	require.NoError(t, p.AppendIndex(annotated, layout.WithAnnotations(map[string]string{refNameKey: testVersion})))
	digest, err := annotated.Digest()
	require.NoError(t, err)
	return dir, digest
}

// cosignKeyPair writes a throwaway key pair as `cosign generate-key-pair` makes it: the private key
// encrypted with COSIGN_PASSWORD.
func cosignKeyPair(t *testing.T) (private, public string) {
	t.Helper()
	password := "throwaway " + t.Name()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte(password)))
	require.NoError(t, err)
	require.True(t, bytes.Contains(priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")), "cosign's key format")
	dir := t.TempDir()
	private, public = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	require.NoError(t, os.WriteFile(private, priv, 0o600))
	require.NoError(t, os.WriteFile(public, pub, 0o600))
	t.Setenv("COSIGN_PASSWORD", password)
	return private, public
}

// The release's SBOM and signatures of an image whose binary is the real sidecarctl: the SBOM parses
// with CycloneDX's own library and names the modules go.mod requires at their versions; the signatures
// verify with the public key over the image's digest and nothing else.
func TestAttachments(t *testing.T) {
	root := repoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.Parse("go.mod", gomod, nil)
	require.NoError(t, err)
	required := map[string]string{}
	for _, r := range mf.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	const opa = "github.com/open-policy-agent/opa"
	require.NotEmpty(t, required[opa], "go.mod requires OPA, which sidecarctl links")

	exe := goBuild(t, root, "./cmd/sidecarctl", runtime.GOARCH)
	// One binary for both platforms: what is checked here is what the SBOM says of it.
	dir, digest := imageLayout(t, map[string]string{"amd64": exe, "arm64": exe})
	key, pub := cosignKeyPair(t)
	tmp := t.TempDir()
	sbomFile, att, pubOut := filepath.Join(tmp, "sbom.cdx.json"), filepath.Join(tmp, "attachments"), filepath.Join(tmp, "out.pub")
	require.NoError(t, run(context.Background(), []string{"attach", "--layout", dir, "--repository", testRepo,
		"--sbom", sbomFile, "--out", att, "--key", key, "--public-key-out", pubOut}))

	t.Run("sbom", func(t *testing.T) {
		f, err := os.Open(sbomFile)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		var bom cdx.BOM
		require.NoError(t, cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom))
		require.NotNil(t, bom.Metadata)
		require.NotNil(t, bom.Metadata.Component)
		assert.Equal(t, cdx.ComponentTypeContainer, bom.Metadata.Component.Type)
		assert.Equal(t, testRepo, bom.Metadata.Component.Name)
		assert.Equal(t, []cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}}, *bom.Metadata.Component.Hashes)
		versions := map[string]string{}
		for _, c := range *bom.Components {
			versions[c.Name] = c.Version
			if c.Name == opa {
				assert.Equal(t, "pkg:golang/github.com/open-policy-agent/opa@"+required[opa], c.PackageURL)
			}
		}
		assert.Equal(t, testVersion, versions[mf.Module.Mod.Path], "the main module at the image's version")
		goVersion, err := exec.CommandContext(context.Background(), "go", "env", "GOVERSION").Output()
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSpace(string(goVersion)), versions["stdlib"], "the Go toolchain that built it")
		// Every module sidecarctl links is one go.mod requires, at that version; OPA is one of them.
		assert.Equal(t, required[opa], versions[opa])
		for mod, v := range versions {
			if mod != mf.Module.Mod.Path && mod != "stdlib" {
				assert.Equal(t, required[mod], v, "%s", mod)
			}
		}
	})

	t.Run("signed", func(t *testing.T) {
		require.NoError(t, run(context.Background(), []string{"verify", "--layout", dir, "--repository", testRepo, "--attachments", att, "--key", pub}))
		written, err := os.ReadFile(pubOut)
		require.NoError(t, err)
		want, err := os.ReadFile(pub)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(written), "--public-key-out is the key pair's public key")
	})

	t.Run("another key", func(t *testing.T) {
		_, otherPub := cosignKeyPair(t)
		err := run(context.Background(), []string{"verify", "--layout", dir, "--repository", testRepo, "--attachments", att, "--key", otherPub})
		require.ErrorContains(t, err, "not signed by the key")
	})

	t.Run("tampered digest", func(t *testing.T) {
		v, err := loadVerifier(pub)
		require.NoError(t, err)
		sigImg, err := attachment(att, cosignTag(testRepo, digest, signatureSuffix))
		require.NoError(t, err)
		m, err := sigImg.Manifest()
		require.NoError(t, err)
		layers, err := sigImg.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		other := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
		// The signature of this digest, over a payload naming another: what a registry could serve to
		// pass one image off as another.
		ref, err := name.NewDigest(testRepo + "@" + other.String())
		require.NoError(t, err)
		forged, err := payload.Cosign{Image: ref}.MarshalJSON()
		require.NoError(t, err)
		err = verifyLayer(staticLayer(t, forged), m.Layers[0].Annotations, testRepo, other, v)
		require.ErrorContains(t, err, "not signed by the key")
		// The genuine payload does not sign another digest either.
		err = verifyLayer(layers[0], m.Layers[0].Annotations, testRepo, other, v)
		require.ErrorContains(t, err, "signs "+digest.String()+", not "+other.String())
		err = verifyLayer(layers[0], map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString([]byte("x"))}, testRepo, digest, v)
		require.ErrorContains(t, err, "not signed by the key")
	})

	t.Run("unsigned", func(t *testing.T) {
		t.Setenv("COSIGN_PASSWORD", "")
		unsigned := filepath.Join(t.TempDir(), "attachments")
		require.NoError(t, run(context.Background(), []string{"attach", "--layout", dir, "--repository", testRepo,
			"--sbom", filepath.Join(t.TempDir(), "sbom.json"), "--out", unsigned}))
		err := run(context.Background(), []string{"verify", "--layout", dir, "--repository", testRepo, "--attachments", unsigned, "--key", pub})
		require.ErrorContains(t, err, "has no "+cosignTag(testRepo, digest, signatureSuffix))
	})

	t.Run("push", func(t *testing.T) {
		host := testRegistry(t)
		repo := host + "/sidecarctl"
		pushAtt := filepath.Join(t.TempDir(), "attachments")
		require.NoError(t, run(context.Background(), []string{"attach", "--layout", dir, "--repository", repo,
			"--sbom", filepath.Join(t.TempDir(), "sbom.json"), "--out", pushAtt, "--key", key}))
		archive := tarDir(t, pushAtt)
		_, err := pushArchive(context.Background(), testPushOptions(host), archive)
		require.ErrorContains(t, err, "which the registry does not serve (push the images first")

		img, err := readImage(dir)
		require.NoError(t, err)
		tag, err := name.NewTag(repo + ":" + testVersion)
		require.NoError(t, err)
		require.NoError(t, remote.WriteIndex(tag, img.Index))
		pushed, err := pushArchive(context.Background(), testPushOptions(host), archive)
		require.NoError(t, err)
		require.Len(t, pushed, 3, "the SBOM, the image's signature and the SBOM's")
		sigRef, err := name.NewTag(cosignTag(repo, digest, signatureSuffix))
		require.NoError(t, err)
		served, err := remote.Image(sigRef)
		require.NoError(t, err)
		m, err := served.Manifest()
		require.NoError(t, err)
		v, err := loadVerifier(pub)
		require.NoError(t, err)
		layers, err := served.Layers()
		require.NoError(t, err)
		require.NoError(t, verifyLayer(layers[0], m.Layers[0].Annotations, repo, digest, v), "the signature the registry serves verifies")
	})
}

func staticLayer(t *testing.T, body []byte) v1.Layer {
	t.Helper()
	img, err := artifact(body, simpleSigningMediaType, nil)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	return layers[0]
}

// One SBOM describes every platform of an image, so platforms whose binaries link different modules
// are refused rather than described by one of them.
func TestSBOMRefusesPlatformsThatDiffer(t *testing.T) {
	root := repoRoot(t)
	small := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(small, "go.mod"), []byte("module example.com/small\n\ngo 1.26\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(small, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600))
	dir, _ := imageLayout(t, map[string]string{
		"amd64": goBuild(t, root, "./cmd/sidecarctl", "amd64"),
		"arm64": goBuild(t, small, ".", "arm64"),
	})
	img, err := readImage(dir)
	require.NoError(t, err)
	_, err = sbom(img, testRepo)
	require.ErrorContains(t, err, "link different modules or Go versions: one SBOM cannot describe both")
}

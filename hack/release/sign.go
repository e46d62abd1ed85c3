package main

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// What cosign writes and reads (github.com/sigstore/cosign, pkg/oci and pkg/types): a signature is an
// image manifest tagged sha256-<digest>.sig in the signed image's repository, each layer a
// simple-signing payload naming the digest, its signature in an annotation; an SBOM attached with
// `cosign attach sbom` is the same shape tagged sha256-<digest>.sbom, one layer of the document.
const (
	simpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation                    = "dev.cosignproject.cosign/signature"
	sbomMediaType          types.MediaType = "application/vnd.cyclonedx+json"
	signatureSuffix                        = "sig"
	sbomSuffix                             = "sbom"
)

// cosignTag is the reference cosign looks up for what is attached to digest in repo.
func cosignTag(repo string, digest v1.Hash, suffix string) string {
	return repo + ":" + digest.Algorithm + "-" + digest.Hex + "." + suffix
}

// artifact is an image manifest of one layer, as cosign makes its attachments: an OCI manifest with
// an empty OCI config.
func artifact(body []byte, mediaType types.MediaType, annotations map[string]string) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(base, mutate.Addendum{Layer: static.NewLayer(body, mediaType), Annotations: annotations})
}

// loadSigner reads a private key in PEM: cosign's own (`cosign generate-key-pair`, encrypted with
// COSIGN_PASSWORD) or an unencrypted PKCS#8, EC or RSA key.
func loadSigner(keyFile string) (signature.Signer, error) {
	pass := cryptoutils.StaticPasswordFunc([]byte(os.Getenv("COSIGN_PASSWORD")))
	s, err := signature.LoadSignerFromPEMFile(keyFile, crypto.SHA256, pass)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (a cosign key needs its COSIGN_PASSWORD)", keyFile, err)
	}
	return s, nil
}

func loadVerifier(keyFile string) (signature.Verifier, error) {
	pemBytes, err := os.ReadFile(keyFile) //nolint:gosec // G304: a public key named on the command line
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", keyFile, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", keyFile, err)
	}
	return v, nil
}

// publicKeyPEM is the signer's public key as cosign prints it (cosign.pub).
func publicKeyPEM(s signature.Signer) ([]byte, error) {
	pub, err := s.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// signatureManifest signs digest in repo: the simple-signing payload `cosign sign` makes, signed
// with the key, as the manifest cosign stores at sha256-<digest>.sig.
func signatureManifest(s signature.Signer, repo string, digest v1.Hash) (named, error) {
	ref, err := name.NewDigest(repo + "@" + digest.String())
	if err != nil {
		return named{}, fmt.Errorf("signing %s@%s: %w", repo, digest, err)
	}
	body, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return named{}, err
	}
	sig, err := s.SignMessage(bytes.NewReader(body))
	if err != nil {
		return named{}, fmt.Errorf("signing %s: %w", ref, err)
	}
	img, err := artifact(body, simpleSigningMediaType, map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)})
	if err != nil {
		return named{}, err
	}
	return named{Ref: cosignTag(repo, digest, signatureSuffix), Manifest: img}, nil
}

// attachments are the SBOM of img as cosign's attachment and, with a signer, the signatures of the
// image and of that attachment (`cosign verify --key` and `cosign verify --attachment sbom --key`).
func attachments(img image, repo string, doc []byte, s signature.Signer) ([]named, error) {
	sbomImg, err := artifact(doc, sbomMediaType, nil)
	if err != nil {
		return nil, err
	}
	out := []named{{Ref: cosignTag(repo, img.Digest, sbomSuffix), Manifest: sbomImg}}
	if s == nil {
		return out, nil
	}
	sbomDigest, err := sbomImg.Digest()
	if err != nil {
		return nil, err
	}
	for _, d := range []v1.Hash{img.Digest, sbomDigest} {
		sig, err := signatureManifest(s, repo, d)
		if err != nil {
			return nil, err
		}
		out = append(out, sig)
	}
	return out, nil
}

// verify checks, as `cosign verify --key` does, that the signature attached to digest in repo is
// the key's over a payload naming that digest, in the attachments layout dir.
func verify(dir, repo string, digest v1.Hash, v signature.Verifier) error {
	sigImg, err := attachment(dir, cosignTag(repo, digest, signatureSuffix))
	if err != nil {
		return err
	}
	layers, err := sigImg.Layers()
	if err != nil {
		return err
	}
	m, err := sigImg.Manifest()
	if err != nil {
		return err
	}
	if len(layers) == 0 {
		return fmt.Errorf("%s: no signature", cosignTag(repo, digest, signatureSuffix))
	}
	for i, l := range layers {
		if err := verifyLayer(l, m.Layers[i].Annotations, repo, digest, v); err != nil {
			return fmt.Errorf("%s: signature %d: %w", cosignTag(repo, digest, signatureSuffix), i, err)
		}
	}
	return nil
}

func verifyLayer(l v1.Layer, annotations map[string]string, repo string, digest v1.Hash, v signature.Verifier) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	body, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(annotations[signatureAnnotation])
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("annotation %s: not a base64 signature", signatureAnnotation)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)); err != nil {
		return fmt.Errorf("not signed by the key: %w", err)
	}
	var p payload.Cosign
	if err := p.UnmarshalJSON(body); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if got := p.Image.DigestStr(); got != digest.String() {
		return fmt.Errorf("signs %s, not %s", got, digest)
	}
	if got := p.Image.Context().Name(); got != repo {
		return fmt.Errorf("signs the repository %s, not %s", got, repo)
	}
	return nil
}

// attachment is the manifest of an attachments layout published as ref.
func attachment(dir, ref string) (v1.Image, error) {
	idx, m, err := readLayout(dir)
	if err != nil {
		return nil, err
	}
	var held []string
	for _, desc := range m.Manifests {
		if desc.Annotations[refNameKey] == ref {
			return idx.Image(desc.Digest)
		}
		held = append(held, desc.Annotations[refNameKey])
	}
	if len(held) == 0 {
		return nil, fmt.Errorf("OCI layout %s: empty", dir)
	}
	return nil, errors.New("OCI layout " + dir + " has no " + ref + " (it holds " + strings.Join(held, ", ") + ")")
}

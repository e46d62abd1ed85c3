package bundles

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
)

// DefaultKeyID names the key when the user gives none: signing and verification must agree on
// the JWT "kid", and a fixed default keeps the single-key case free of flags.
const DefaultKeyID = "default"

// Write writes b as a gzipped tarball that stock `opa` reads (`opa eval -b`, `opa run -b`).
func Write(w io.Writer, b *bundle.Bundle) error {
	return bundle.NewWriter(w).Write(*b)
}

// Sign adds .signatures.json to b. keyPEM is a PEM private key (RS256/ES256/...) or, for HS*, a secret.
func Sign(b *bundle.Bundle, keyPEM, alg, keyID string) error {
	if keyID == "" {
		keyID = DefaultKeyID
	}
	if err := b.GenerateSignature(bundle.NewSigningConfig(keyPEM, alg, ""), keyID, false); err != nil {
		return fmt.Errorf("signing bundle: %w", err)
	}
	return nil
}

// Verification holds public keys by key id. A non-nil Verification makes every bundle read with it
// require a valid signature: an unsigned bundle is refused, not merely warned about (the trap of
// OPA's own configuration, where verification is enforced only with a signing block).
type Verification struct {
	config *bundle.VerificationConfig
}

// NewVerification builds a Verification from PEM public keys keyed by key id. alg defaults to RS256.
// scope, when set, must equal the scope claim of the bundle's signature.
func NewVerification(publicKeys map[string]string, alg, scope string) (*Verification, error) {
	if len(publicKeys) == 0 {
		return nil, fmt.Errorf("bundle verification: no public keys given")
	}
	if alg == "" {
		alg = "RS256"
	}
	cfgs := make(map[string]*bundle.KeyConfig, len(publicKeys))
	for id, pem := range publicKeys {
		// Not keys.NewKeyConfig: it first stats its argument as a file name, which fails on PEM text
		// whose base64 holds a '/'-separated run longer than a file name may be.
		cfgs[id] = &keys.Config{Key: pem, Algorithm: alg, Scope: scope}
	}
	return &Verification{config: bundle.NewVerificationConfig(cfgs, "", scope, nil)}, nil
}

// OPAConfig is the same keys in OPA's form, for OPA components that parse signed bundles themselves
// (the bundle downloader refuses a signed bundle when it has no keys). Nil-safe.
func (v *Verification) OPAConfig() *bundle.VerificationConfig {
	if v == nil {
		return nil
	}
	return v.config
}

// LoadVerificationKeys reads PEM public key files; each key's id is its file name without extension,
// unless there is exactly one key, which also answers to DefaultKeyID.
func LoadVerificationKeys(paths []string, alg, scope string) (*Verification, error) {
	pems := make(map[string]string, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: reading verification key: %w", p, err)
		}
		pems[strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))] = string(raw)
	}
	if len(paths) == 1 {
		for _, pem := range pems {
			pems[DefaultKeyID] = pem
		}
	}
	return NewVerification(pems, alg, scope)
}

// Read reads a bundle from a directory or a .tar.gz file. With a non-nil v the bundle must carry a
// signature that verifies against one of v's keys, covering exactly the bundle's files.
func Read(path string, v *Verification) (*bundle.Bundle, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var loader bundle.DirectoryLoader
	if info.IsDir() {
		loader = bundle.NewDirectoryLoader(path)
	} else {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		loader = bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(raw), path)
	}
	return readWith(path, loader, v)
}

// ReadBytes reads a gzipped tarball bundle held in memory (e.g. downloaded), named for errors.
func ReadBytes(name string, raw []byte, v *Verification) (*bundle.Bundle, error) {
	return readWith(name, bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(raw), name), v)
}

// MaxFileSize bounds each file of a bundle, decompressed: OPA's own default is 1 GiB, so a
// 200 KB gzip bomb made a poll hold that much before the bundle was refused. Policies and
// whitelists are a few KiB to a few MiB; a file past this refuses the bundle.
const MaxFileSize = 32 << 20

// skipTests leaves Rego test files out of a bundle being loaded to serve: tests live beside an
// administrator's policies (so `opa test` and `sidecarctl policy test` find them) but are not policy,
// and their packages usually sit outside the bundle's roots. `opa build --ignore '*_test.rego'` does
// the same when building.
func skipTests(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && strings.HasSuffix(abspath, "_test.rego")
}

func readWith(name string, loader bundle.DirectoryLoader, v *Verification) (*bundle.Bundle, error) {
	r := bundle.NewCustomReader(loader.WithFilter(skipTests)).WithBundleName(name).WithSizeLimitBytes(MaxFileSize)
	if v != nil {
		r = r.WithBundleVerificationConfig(v.config)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: bundle refused: %w", name, err)
	}
	return &b, nil
}

// OwnsRoot reports whether b claims root or a path that overlaps it.
func OwnsRoot(b *bundle.Bundle, root string) bool {
	if b.Manifest.Roots == nil {
		return false
	}
	for _, r := range *b.Manifest.Roots {
		if bundle.RootPathsOverlap(r, root) {
			return true
		}
	}
	return false
}

// DataBundle wraps a data document as a bundle that owns root: how a whitelist that arrives as
// data (OpenKruise's kruise-configuration ConfigMap) reaches the policies exactly as an
// administrator's whitelist bundle would. An empty revision is replaced by a digest of the data.
func DataBundle(root, revision string, doc map[string]any) *bundle.Bundle {
	data := map[string]any{root: doc}
	if revision == "" {
		revision, _ = contentRevision(data, nil)
	}
	return &bundle.Bundle{
		Manifest: bundle.Manifest{Revision: revision, Roots: &[]string{root}},
		Data:     data,
	}
}

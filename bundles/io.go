package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// Read reads a bundle from a directory or a .tar.gz file within the default Limits (a directory,
// the operator's own files, within the per-file limit only). With a non-nil v the bundle must carry
// a signature that verifies against one of v's keys, covering exactly the bundle's files.
func Read(path string, v *Verification) (*bundle.Bundle, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var l Limits
	if info.IsDir() {
		// OPA's directory loader opens each file only when it is read, after the signature was
		// checked, and refuses a file larger than the limit by its size on disk before reading it.
		return readWith(path, bundle.NewDirectoryLoader(path), v, l.WithDefaults(), filepath.Join(path, ".manifest"))
	}
	raw, err := l.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l.ReadBytes(path, raw, v)
}

// ReadBytes reads a gzipped tarball bundle held in memory (e.g. downloaded), named for errors,
// within the default Limits.
func ReadBytes(name string, raw []byte, v *Verification) (*bundle.Bundle, error) {
	return Limits{}.ReadBytes(name, raw, v)
}

// Default Limits. Administrators' policies and whitelists are a few KiB to a few MiB.
const (
	// MaxArchiveSize bounds a bundle's gzipped tarball as it is downloaded or read from disk.
	MaxArchiveSize = 16 << 20
	// MaxFileSize bounds each file of a bundle, decompressed. OPA's own default is 1 GiB, so a
	// small gzip bomb made a poll hold that much before the bundle was refused (BenchmarkHTTPSourceBomb).
	MaxFileSize = 32 << 20
	// MaxTotalSize bounds a whole bundle decompressed: without it, 32 files just under MaxFileSize
	// (1 MiB of gzip) made a poll hold 1 GiB.
	MaxTotalSize = 64 << 20
)

// Limits bound what reading one bundle may cost. A zero field takes its default.
type Limits struct {
	// ArchiveBytes bounds the gzipped tarball: a download's body, a .tar.gz file, a persisted copy
	// (default MaxArchiveSize).
	ArchiveBytes int64
	// FileBytes bounds each file of the bundle, decompressed (default MaxFileSize).
	FileBytes int64
	// TotalBytes bounds the whole tarball decompressed: every file, tar header and padding
	// (default MaxTotalSize).
	TotalBytes int64
}

// WithDefaults is l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.ArchiveBytes <= 0 {
		l.ArchiveBytes = MaxArchiveSize
	}
	if l.FileBytes <= 0 {
		l.FileBytes = MaxFileSize
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = MaxTotalSize
	}
	return l
}

// ErrTooLarge is wrapped by every refusal for size, so that a caller can tell a bundle refused for
// what it holds from a source that failed to deliver it.
var ErrTooLarge = errors.New("too large")

// ReadArchive reads a gzipped tarball from r, at most ArchiveBytes of it: a server or a file that
// goes on past the limit is cut there and refused.
func (l Limits) ReadArchive(r io.Reader) ([]byte, error) {
	l = l.WithDefaults()
	raw, err := io.ReadAll(io.LimitReader(r, l.ArchiveBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > l.ArchiveBytes {
		return nil, l.archiveTooLarge()
	}
	return raw, nil
}

// ReadFile is ReadArchive of the file at path.
func (l Limits) ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return l.ReadArchive(f)
}

func (l Limits) archiveTooLarge() error {
	return fmt.Errorf("%w: the archive is over the size limit of %d bytes compressed", ErrTooLarge, l.ArchiveBytes)
}

// ReadBytes reads a gzipped tarball bundle held in memory, named for errors, within l. With a
// non-nil v the bundle must carry a signature that verifies against one of v's keys.
//
// It reads the archive twice. The first pass (scan) streams through it keeping nothing: it refuses
// a file over FileBytes by its tar header, before decompressing it, and the archive as soon as it
// decompresses past TotalBytes; with v it verifies .signatures.json where it finds it and refuses
// the bundle then if the signature does not verify, or at the end if there was none. Only a bundle
// that passed is read again by OPA's reader, which holds every file, checks each against the
// signature and parses them; it therefore never holds more than TotalBytes. One pass cannot do
// both: OPA's loader holds every file before it looks at the signature, and `opa build` writes
// .signatures.json after data.json and the policies, so a reader that kept the files it met before
// the signature would hold them unverified.
func (l Limits) ReadBytes(name string, raw []byte, v *Verification) (*bundle.Bundle, error) {
	l = l.WithDefaults()
	if int64(len(raw)) > l.ArchiveBytes {
		return nil, refused(name, l.archiveTooLarge())
	}
	if err := l.scan(raw, v); err != nil {
		return nil, refused(name, err)
	}
	return readWith(name, bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(raw), name), v, l, "a .manifest at the top of the bundle")
}

// scan is ReadBytes' first pass. OPA's tarball loader reads the same bytes the same way (gzip, then
// tar, regular files only), so what scan accepts, OPA's loader holds within the same limits.
func (l Limits) scan(raw []byte, v *Verification) error {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("archive read failed: %w", err)
	}
	budget := &budgetReader{r: zr, left: l.TotalBytes}
	tr := tar.NewReader(budget)
	signed, last := false, ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errOverBudget) {
			return l.totalTooLarge(last)
		}
		if err != nil {
			return fmt.Errorf("archive read failed after %q: %w", last, err)
		}
		last = h.Name
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := l.Check(h.Name, h.Size, l.TotalBytes-budget.left+h.Size); err != nil {
			return err
		}
		if v != nil && bundle.IsSignaturesFile(h.Name) && !signed {
			if err := v.verifySignatures(tr); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			signed = true
			continue
		}
		if _, err := io.CopyN(io.Discard, tr, h.Size); err != nil {
			return fmt.Errorf("archive read failed in %q: %w", h.Name, err)
		}
	}
	if v != nil && !signed {
		// OPA's words, so that the refusal reads the same whichever pass finds it.
		return errors.New("bundle missing .signatures.json file")
	}
	return nil
}

// Check refuses a file of size bytes (decompressed) that brings its bundle to total bytes: the
// refusals ReadBytes makes, for a caller that assembles a bundle itself.
func (l Limits) Check(file string, size, total int64) error {
	l = l.WithDefaults()
	if size > l.FileBytes {
		return fmt.Errorf("%w: file %q is over the size limit of %d bytes per file (decompressed)", ErrTooLarge, file, l.FileBytes)
	}
	if total > l.TotalBytes {
		return l.totalTooLarge(file)
	}
	return nil
}

func (l Limits) totalTooLarge(file string) error {
	return fmt.Errorf("%w: the bundle is over the size limit of %d bytes in total (decompressed), at file %q", ErrTooLarge, l.TotalBytes, file)
}

// verifySignatures verifies the JWT of a .signatures.json read from r (the files' digests it lists
// are checked by OPA's reader, which holds the files).
func (v *Verification) verifySignatures(r io.Reader) error {
	var sc bundle.SignaturesConfig
	if err := json.NewDecoder(r).Decode(&sc); err != nil {
		return fmt.Errorf("bundle load failed on signatures decode: %w", err)
	}
	_, err := bundle.VerifyBundleSignature(sc, v.config)
	return err
}

var errOverBudget = errors.New("over budget")

// budgetReader reads at most left bytes from r, then fails with errOverBudget.
type budgetReader struct {
	r    io.Reader
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errOverBudget
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// skipTests leaves Rego test files out of a bundle being loaded to serve: tests live beside an
// administrator's policies (so `opa test` and `sidecarctl policy test` find them) but are not policy,
// and their packages usually sit outside the bundle's roots. `opa build --ignore '*_test.rego'` does
// the same when building.
func skipTests(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && strings.HasSuffix(abspath, "_test.rego")
}

// readWith reads one bundle. manifest says where its .manifest belongs, for the message refusing a
// bundle without roots.
func readWith(name string, loader bundle.DirectoryLoader, v *Verification, l Limits, manifest string) (*bundle.Bundle, error) {
	r := bundle.NewCustomReader(loader.WithFilter(skipTests).WithSizeLimitBytes(l.FileBytes)).
		WithBundleName(name).WithSizeLimitBytes(l.FileBytes)
	if v != nil {
		r = r.WithBundleVerificationConfig(v.config)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return nil, refused(name, err)
	}
	// OPA reads a bundle without .manifest (or without "roots" in it) as owning every path of data,
	// which always collides with the compiled bundle's root; the engine's collision message would
	// name neither the bundle nor the fix.
	if b.Manifest.Roots == nil || slices.Contains(*b.Manifest.Roots, "") {
		return nil, refused(name, fmt.Errorf(`no .manifest naming its roots, so it would own all of data, the compiled policies' root %q included: write {"roots": ["gates"]} (a gate) or {"roots": ["whitelist"]} (a whitelist) to %s`, Root, manifest))
	}
	return &b, nil
}

func refused(name string, err error) error { return fmt.Errorf("%s: bundle refused: %w", name, err) }

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

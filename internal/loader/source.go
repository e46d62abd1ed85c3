package loader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/sidecarops/sidecarops/bundles"
)

// persister keeps a source's last good bundle bytes under <dir>/<source>/bundle.tar.gz (and the
// HTTP ETag beside it), like OPA's bundles[_].persist, so that a restart while the source is
// unreachable still starts with the administrator's bundle. An empty dir disables it.
type persister struct {
	dir string
}

const (
	persistedBundle = "bundle.tar.gz"
	persistedETag   = "etag"
)

func (p persister) enabled() bool { return p.dir != "" }

// save writes atomically (temporary file, then rename): a crash mid-write must not leave a torn
// bundle that would then be refused at the next start.
func (p persister) save(raw []byte, etag string) error {
	if !p.enabled() {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(p.dir, persistedBundle), raw); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(p.dir, persistedETag), []byte(etag))
}

func (p persister) load(l bundles.Limits) (raw []byte, etag string, err error) {
	raw, err = l.ReadFile(p.path())
	if err != nil {
		return nil, "", err
	}
	e, err := os.ReadFile(filepath.Join(p.dir, persistedETag))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	return raw, string(e), nil
}

func (p persister) path() string { return filepath.Join(p.dir, persistedBundle) }

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// readPersisted restores a source's persisted bundle, verified again and within l: keys and limits
// may have changed since it was saved, and the disk is not trusted more than the network.
func readPersisted(p persister, v *bundles.Verification, l bundles.Limits) (*bundle.Bundle, []byte, string, error) {
	if !p.enabled() {
		return nil, nil, "", errors.New("no persistence directory configured")
	}
	raw, etag, err := p.load(l)
	if err != nil {
		return nil, nil, "", err
	}
	b, err := l.ReadBytes(p.path(), raw, v)
	if err != nil {
		return nil, nil, "", err
	}
	return b, raw, etag, nil
}

// tarDirectory archives exactly the files OPA's directory loader reads from dir (the loader
// bundles.Read uses), with their bundle paths, so that reading the archive is reading the directory:
// the signature covers the same file names and the persisted copy is what was verified. A file over
// l.FileBytes, or files over l.TotalBytes together, are refused as soon as that much was read.
func tarDirectory(dir string, l bundles.Limits) ([]byte, error) {
	l = l.WithDefaults()
	loader := bundle.NewDirectoryLoader(dir)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	total := int64(0)
	for {
		d, err := loader.NextFile()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var content bytes.Buffer
		n, err := d.Read(&content, l.FileBytes+1)
		d.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", d.Path(), err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(d.Path()), "/")
		total += n
		if err := l.Check(name, n, total); err != nil {
			return nil, err
		}
		hdr := &tar.Header{
			Name:     name,
			Mode:     0o644,
			Size:     int64(content.Len()),
			Typeflag: tar.TypeReg,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(raw []byte) [sha256.Size]byte { return sha256.Sum256(raw) }

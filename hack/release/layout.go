package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// refNameKey names a layout's manifest. Here it is a whole reference (registry, repository and tag),
// which the OCI image layout allows, so that push needs nothing but the layout.
const refNameKey = "org.opencontainers.image.ref.name"

// readLayout is an OCI layout's index.json, and the index to read the manifests it names from.
func readLayout(dir string) (v1.ImageIndex, *v1.IndexManifest, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	return idx, m, nil
}

// named is a manifest and the reference it is published under.
type named struct {
	Ref      string
	Manifest v1.Image
}

// writeLayout replaces dir with an OCI layout holding each manifest under its reference.
func writeLayout(dir string, manifests []named) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the previous layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	for _, m := range manifests {
		if err := p.AppendImage(m.Manifest, layout.WithAnnotations(map[string]string{refNameKey: m.Ref})); err != nil {
			return fmt.Errorf("OCI layout %s: %s: %w", dir, m.Ref, err)
		}
	}
	return nil
}

// untar unpacks an archive of an OCI layout (as make release writes them) into dir, refusing any
// entry that would land outside it.
func untar(archive, dir string) error {
	f, err := os.Open(archive) //nolint:gosec // G304: a release file named on the command line
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		if !filepath.IsLocal(h.Name) && filepath.Clean(h.Name) != "." {
			return fmt.Errorf("%s: entry %q is outside the archive's directory", archive, h.Name)
		}
		target := filepath.Join(dir, h.Name) //nolint:gosec // G305: checked local above
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o750); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644) //nolint:gosec // G304: checked local above
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil { //nolint:gosec // G110: a release's own archive
				_ = out.Close()
				return fmt.Errorf("%s: %s: %w", archive, h.Name, err)
			}
			if err := out.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q: not a file or directory (type %c)", archive, h.Name, h.Typeflag)
		}
	}
}

package loader

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sidecarops/sidecarops/bundles"
)

const defaultFileInterval = 5 * time.Second

// FileOptions configure a FileSource.
type FileOptions struct {
	// Name identifies the source in metrics, logs, Events and the persistence directory.
	Name string
	// Path is a bundle directory (with a .manifest naming its roots) or a .tar.gz bundle file.
	Path string
	// Interval is how often Path is checked for changes (default 5s).
	Interval time.Duration
	// Verification, when set, requires every bundle to carry a valid signature.
	Verification *bundles.Verification
	// Limits bound the .tar.gz file (compressed) and the bundle it holds, or the directory's files.
	Limits bundles.Limits
	// PersistDir, when set, keeps the last good bundle under PersistDir/Name/bundle.tar.gz and
	// restores it at start when Path is missing or refused.
	PersistDir string
}

// FileSource offers the bundle at a path to a Loader and re-reads it when it changes.
//
// It polls rather than using inotify: a bundle mounted from a ConfigMap or Secret is replaced by
// swapping a symlink, which inotify reports on the parent directory only, and polling a few KB every
// few seconds costs nothing. A change is a change of content (a digest of what OPA's loader reads),
// so touching a file or rewriting it identically does not recompile, and a refused bundle is
// refused (logged, recorded) once, not at every poll.
type FileSource struct {
	st   *Loader
	opts FileOptions
	p    persister

	mu      sync.Mutex
	last    [sha256.Size]byte // digest of the content last handled (offered or refused)
	handled bool
	refused bool // the content last handled was refused
	offered bool
	lastErr string // last unavailability reported, so a missing file is logged once, not every poll
}

// NewFileSource registers a file source with st; Start (or Poll) reads it.
func NewFileSource(st *Loader, opts FileOptions) (*FileSource, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("loader: file source %q: no path", opts.Name)
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultFileInterval
	}
	if err := st.RegisterSource(opts.Name); err != nil {
		return nil, err
	}
	f := &FileSource{st: st, opts: opts}
	if opts.PersistDir != "" {
		f.p = persister{dir: filepath.Join(opts.PersistDir, opts.Name)}
	}
	return f, nil
}

// NeedLeaderElection is false: every replica reads its own copy.
func (f *FileSource) NeedLeaderElection() bool { return false }

// Start reads the bundle, falls back to the persisted copy when it cannot be used, then polls for
// changes until ctx ends.
func (f *FileSource) Start(ctx context.Context) error {
	f.Poll()
	f.restore()
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f.Poll()
		}
	}
}

// Poll reads the path and offers its bundle when the content changed since the last poll. A bundle
// that fails verification or is over the Limits is refused and the source's last good bundle keeps
// serving.
func (f *FileSource) Poll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, err := f.read()
	var sum [sha256.Size]byte
	switch {
	case err == nil:
		sum = digest(raw)
	case errors.Is(err, bundles.ErrTooLarge):
		// Nothing whole was read to take a digest of; the refusal, which names the file and the
		// limit, tells this content from other content as well.
		sum = digest([]byte(err.Error()))
	default:
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.st.sourceError(f.opts.Name, err)
		}
		return
	}
	f.lastErr = ""
	defer f.st.sourceAnswered(f.opts.Name)
	if f.handled && sum == f.last {
		return
	}
	f.handled, f.last, f.refused = true, sum, true
	if err != nil {
		f.st.refuse(f.opts.Name, fmt.Errorf("%s: bundle refused: %w", f.opts.Path, err))
		return
	}
	b, err := f.opts.Limits.ReadBytes(f.opts.Path, raw, f.opts.Verification)
	if err != nil {
		f.st.refuse(f.opts.Name, err)
		return
	}
	if err := f.st.SetBundle(f.opts.Name, b); err != nil {
		f.st.refuse(f.opts.Name, err)
		return
	}
	f.refused, f.offered = false, true
	if err := f.p.save(raw, ""); err != nil {
		f.st.log.Error(err, "persisting bundle failed", "source", f.opts.Name)
	}
}

// restore offers the persisted bundle when nothing usable was read at start.
func (f *FileSource) restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offered || !f.p.enabled() {
		return
	}
	b, _, _, err := readPersisted(f.p, f.opts.Verification, f.opts.Limits)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			f.st.refuse(f.opts.Name, fmt.Errorf("persisted bundle: %w", err))
		}
		return
	}
	if err := f.st.SetBundle(f.opts.Name, b); err != nil {
		f.st.refuse(f.opts.Name, err)
		return
	}
	f.offered = true
	f.st.log.Info("using the persisted bundle", "source", f.opts.Name, "revision", b.Manifest.Revision, "path", f.p.path())
}

// read returns the bundle as gzipped tarball bytes: a file as it is, a directory archived.
func (f *FileSource) read() ([]byte, error) {
	info, err := os.Stat(f.opts.Path)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return tarDirectory(f.opts.Path, f.opts.Limits)
	}
	return f.opts.Limits.ReadFile(f.opts.Path)
}

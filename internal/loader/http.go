package loader

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/sidecarops/sidecarops/bundles"
)

// OPA's bundle polling defaults (bundles[_].polling.min_delay_seconds / max_delay_seconds).
const (
	defaultMinDelay = 60 * time.Second
	defaultMaxDelay = 120 * time.Second
	minRetryDelay   = 100 * time.Millisecond
	// defaultDownloadTimeout bounds one download, body included. OPA's response_header_timeout_seconds
	// covers only the headers: a server that stalls mid-body held the poller forever.
	defaultDownloadTimeout = 60 * time.Second
	// defaultRefusedMaxDelay caps the back-off while the server offers a refused bundle: an
	// administrator's fix is picked up within it.
	defaultRefusedMaxDelay = 2 * time.Minute
)

// HTTPOptions configure an HTTPSource.
type HTTPOptions struct {
	// Name identifies the source in metrics, logs, Events and the persistence directory.
	Name string
	// URL is the bundle service's base URL (OPA's services[_].url), e.g. https://bundles.example.com.
	URL string
	// Resource is the bundle's path on the service (OPA's bundles[_].resource), e.g. bundles/gates.tar.gz.
	Resource string
	// Service is optional extra OPA service configuration in OPA's JSON form (headers, credentials,
	// tls, response_header_timeout_seconds); URL overrides its "url".
	Service json.RawMessage
	// MinDelay and MaxDelay bound the jittered polling interval (defaults 60s and 120s, as OPA's).
	MinDelay, MaxDelay time.Duration
	// RefusedMaxDelay caps the polling interval while the server offers a refused bundle: it doubles
	// from MaxDelay with every poll that finds the bundle still refused (default 2m, at least MaxDelay).
	RefusedMaxDelay time.Duration
	// Timeout bounds one download attempt, body included (default 60s); past it the attempt is a
	// source error and the next poll follows the backoff.
	Timeout time.Duration
	// Verification, when set, requires every bundle to carry a valid signature.
	Verification *bundles.Verification
	// Limits bound a download (compressed) and the bundle it holds (decompressed).
	Limits bundles.Limits
	// PersistDir, when set, keeps the last good bundle (and its ETag) under PersistDir/Name and
	// restores it at start, so a restart while the server is down still serves the bundle.
	PersistDir string
}

// HTTPSource polls an OPA bundle service through OPA's REST client (the service configuration:
// credentials, TLS, headers): it sends the ETag of the last bundle it handled in If-None-Match,
// takes 304 Not Modified as "unchanged", and reads every new bundle with bundles.Limits.ReadBytes
// before offering it to the Loader.
//
// The ETag it sends is that of the last bundle handled, refused or not: a server still offering a
// refused bundle answers 304, which costs no download, no parse and no new log line, and the source
// stays refused (sidecarops_bundle_refused) until the server offers another bundle. A server that
// sends no ETag is recognised by a digest of the body instead.
//
// OPA's download package is not used: it parses every body with OPA's tarball loader, which holds
// every file of the bundle before the signature is looked at, cannot bound the body, and forgets
// the ETag of a bundle it refused, so a refused bundle was downloaded, parsed and logged again on
// every poll (issue #11).
type HTTPSource struct {
	st     *Loader
	opts   HTTPOptions
	p      persister
	client rest.Client

	// mu serializes polls and guards the fields below.
	mu      sync.Mutex
	etag    string            // sent in If-None-Match: the last bundle handled, good or refused
	last    [sha256.Size]byte // digest of the last body handled, for servers that send no ETag
	handled bool
	refused bool // the last bundle handled was refused
	offered bool
}

// NewHTTPSource registers an HTTP bundle source with st; Start (or Poll) downloads.
func NewHTTPSource(st *Loader, opts HTTPOptions) (*HTTPSource, error) {
	if opts.URL == "" || opts.Resource == "" {
		return nil, fmt.Errorf("loader: HTTP source %q: URL and Resource are required", opts.Name)
	}
	if opts.MinDelay <= 0 {
		opts.MinDelay = defaultMinDelay
	}
	if opts.MaxDelay < opts.MinDelay {
		opts.MaxDelay = max(defaultMaxDelay, opts.MinDelay)
	}
	if opts.RefusedMaxDelay <= 0 {
		opts.RefusedMaxDelay = defaultRefusedMaxDelay
	}
	opts.RefusedMaxDelay = max(opts.RefusedMaxDelay, opts.MaxDelay)
	if opts.Timeout <= 0 {
		opts.Timeout = defaultDownloadTimeout
	}
	svc := map[string]any{}
	if len(opts.Service) > 0 {
		if err := json.Unmarshal(opts.Service, &svc); err != nil {
			return nil, fmt.Errorf("loader: HTTP source %q: service configuration: %w", opts.Name, err)
		}
	}
	svc["name"], svc["url"] = opts.Name, opts.URL
	raw, err := json.Marshal(svc)
	if err != nil {
		return nil, err
	}
	// OPA's own logger would write to stderr in its format; this source logs through the Loader.
	client, err := rest.New(raw, nil, rest.Name(opts.Name), rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return nil, fmt.Errorf("loader: HTTP source %q: %w", opts.Name, err)
	}
	if err := st.RegisterSource(opts.Name); err != nil {
		return nil, err
	}
	h := &HTTPSource{st: st, opts: opts, client: client}
	if opts.PersistDir != "" {
		h.p = persister{dir: filepath.Join(opts.PersistDir, opts.Name)}
	}
	return h, nil
}

// NeedLeaderElection is false: every replica downloads for its own snapshot.
func (h *HTTPSource) NeedLeaderElection() bool { return false }

// Start restores the persisted bundle (so that readiness does not wait for the server), then polls
// until ctx ends, at the pace of a pacer.
func (h *HTTPSource) Start(ctx context.Context) error {
	h.restore()
	p := pacer{min: h.opts.MinDelay, max: h.opts.MaxDelay, refusedMax: h.opts.RefusedMaxDelay}
	for {
		refused, err := h.poll(ctx)
		t := time.NewTimer(p.next(refused, err))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// pacer spaces the polls of a bundle service: a jittered min..max after a bundle was accepted or
// found unchanged; after a failure, an exponential backoff from 100ms to max, as OPA's; while the
// server offers a refused bundle, a backoff doubling from max to refusedMax, so that a refused
// bundle is asked about ever less often, until the server offers another.
type pacer struct {
	min, max, refusedMax time.Duration
	retries, refusals    int
}

func (p *pacer) next(refused bool, err error) time.Duration {
	switch {
	case err != nil:
		d := util.DefaultBackoff(float64(minRetryDelay), float64(p.max), p.retries)
		p.retries++
		return d
	case refused:
		p.retries = 0
		p.refusals++
		return util.Backoff(float64(p.max), float64(p.refusedMax), 0.2, 2, p.refusals)
	default:
		p.retries, p.refusals = 0, 0
		return p.min + rand.N(p.max-p.min+1) //nolint:gosec // G404: polling jitter, not a secret; math/rand/v2 is the right source
	}
}

// Poll makes one download attempt, within the Timeout. It returns an error when the server could
// not be reached, answered with an error status or did not finish in time; a downloaded bundle
// that is refused is reported (metrics, log, Event) but is not a transport error. Polls are
// serialized, also with those of Start.
func (h *HTTPSource) Poll(ctx context.Context) error {
	_, err := h.poll(ctx)
	return err
}

// poll is Poll, also telling whether the server's bundle stands refused.
func (h *HTTPSource) poll(ctx context.Context) (refused bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	attempt, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	a, err := h.download(attempt)
	if err != nil && !errors.Is(err, bundles.ErrTooLarge) {
		if attempt.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%s: download did not finish within %s: %w", h.opts.Resource, h.opts.Timeout, err)
		}
		h.st.sourceError(h.opts.Name, err)
		return false, err
	}
	defer h.st.sourceAnswered(h.opts.Name)
	if a.unchanged || h.handled && a.sum == h.last {
		return h.refused, nil // the bundle last handled, still; if it was refused, it was said then
	}
	h.handled, h.last, h.etag = true, a.sum, a.etag
	h.refused = true
	name := h.opts.URL + "/" + h.opts.Resource
	if err != nil {
		h.st.refuse(h.opts.Name, fmt.Errorf("%s: bundle refused: %w", name, err))
		return true, nil
	}
	b, err := h.opts.Limits.ReadBytes(name, a.raw, h.opts.Verification)
	if err != nil {
		h.st.refuse(h.opts.Name, err)
		return true, nil
	}
	b.Etag = a.etag
	if err := h.st.SetBundle(h.opts.Name, b); err != nil {
		h.st.refuse(h.opts.Name, err)
		return true, nil
	}
	h.refused, h.offered = false, true
	if err := h.p.save(a.raw, a.etag); err != nil {
		h.st.log.Error(err, "persisting bundle failed", "source", h.opts.Name)
	}
	return false, nil
}

// answer is what a bundle service answered.
type answer struct {
	unchanged bool // 304 Not Modified, or a 200 naming the ETag last handled
	raw       []byte
	etag      string
	sum       [sha256.Size]byte // digest of raw, or of what was read of a body over the limit
}

// download GETs the bundle, sending If-None-Match, and reads a new body within
// Limits.ArchiveBytes. A body over the limit is cut there: the error wraps bundles.ErrTooLarge and
// the answer's digest, of what was read, tells that body from others as well as a digest of all of
// it would.
func (h *HTTPSource) download(ctx context.Context) (answer, error) {
	resp, err := h.client.WithHeader("If-None-Match", h.etag).Do(ctx, http.MethodGet, h.opts.Resource)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return answer{unchanged: true}, nil
	default:
		return answer{}, fmt.Errorf("%s: server replied with %s", h.opts.Resource, http.StatusText(resp.StatusCode))
	}
	a := answer{etag: resp.Header.Get("ETag")}
	if a.etag != "" && a.etag == h.etag {
		a.unchanged = true // a server that ignores If-None-Match; the body is not read
		return a, nil
	}
	hash := sha256.New()
	a.raw, err = h.opts.Limits.ReadArchive(io.TeeReader(resp.Body, hash))
	hash.Sum(a.sum[:0])
	return a, err
}

// restore offers the persisted bundle and remembers its ETag, so an unchanged server answers 304
// instead of sending the bundle again.
func (h *HTTPSource) restore() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.offered || !h.p.enabled() {
		return
	}
	b, raw, etag, err := readPersisted(h.p, h.opts.Verification, h.opts.Limits)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			h.st.refuse(h.opts.Name, fmt.Errorf("persisted bundle: %w", err))
		}
		return
	}
	if err := h.st.SetBundle(h.opts.Name, b); err != nil {
		h.st.refuse(h.opts.Name, err)
		return
	}
	h.offered = true
	h.handled, h.last, h.etag = true, digest(raw), etag
	h.st.log.Info("using the persisted bundle until the server answers", "source", h.opts.Name, "revision", b.Manifest.Revision, "etag", etag)
}

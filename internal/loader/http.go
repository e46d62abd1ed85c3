package loader

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
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
	// Timeout bounds one download attempt, body included (default 60s); past it the attempt is a
	// source error and the next poll follows the backoff.
	Timeout time.Duration
	// Verification, when set, requires every bundle to carry a valid signature.
	Verification *bundles.Verification
	// PersistDir, when set, keeps the last good bundle (and its ETag) under PersistDir/Name and
	// restores it at start, so a restart while the server is down still serves the bundle.
	PersistDir string
}

// HTTPSource polls an OPA bundle service with OPA's downloader: it sends the last bundle's ETag in
// If-None-Match, takes 304 Not Modified as "unchanged", and verifies every new bundle with
// bundles.ReadBytes before offering it to the Loader.
//
// The downloader runs in manual trigger mode and this source drives it, rather than OPA's own
// periodic loop: that loop stops only through Stop (not a context), schedules in whole seconds, and
// cannot be stepped in tests; the HTTP exchange, ETag handling and bundle parsing stay OPA's.
type HTTPSource struct {
	st   *Loader
	opts HTTPOptions
	p    persister
	dl   *download.Downloader

	// pollMu serializes downloads: OPA's Downloader is not safe for concurrent triggers.
	pollMu sync.Mutex

	mu sync.Mutex
	// attemptDone is closed by update when the attempt Poll started has been reported.
	attemptDone chan struct{}
	last        [sha256.Size]byte // digest of the last bundle handled, for servers that send no ETag
	handled     bool
	offered     bool
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
	trigger := plugins.TriggerManual
	cfg := download.Config{Trigger: &trigger}
	if err := cfg.ValidateAndInjectDefaults(); err != nil {
		return nil, err
	}
	if err := st.RegisterSource(opts.Name); err != nil {
		return nil, err
	}
	h := &HTTPSource{st: st, opts: opts}
	if opts.PersistDir != "" {
		h.p = persister{dir: filepath.Join(opts.PersistDir, opts.Name)}
	}
	h.dl = download.New(cfg, client, opts.Resource).
		WithCallback(h.update).
		// Persistence makes the downloader keep the raw bytes (Update.Raw): they are what
		// bundles.ReadBytes verifies and what is persisted.
		WithBundlePersistence(true).
		WithSizeLimitBytes(bundles.MaxFileSize).
		WithBundleName(opts.Name).
		WithBundleVerificationConfig(opts.Verification.OPAConfig())
	return h, nil
}

// NeedLeaderElection is false: every replica downloads for its own snapshot.
func (h *HTTPSource) NeedLeaderElection() bool { return false }

// Start restores the persisted bundle (so that readiness does not wait for the server), then polls
// until ctx ends: a jittered MinDelay..MaxDelay after success, an exponential backoff from 100ms to
// MaxDelay after a failure, as OPA does.
func (h *HTTPSource) Start(ctx context.Context) error {
	h.restore()
	retry := 0
	for {
		delay := h.opts.MinDelay + rand.N(h.opts.MaxDelay-h.opts.MinDelay+1) //nolint:gosec // G404: polling jitter, not a secret; math/rand/v2 is the right source
		if err := h.Poll(ctx); err != nil {
			delay = util.DefaultBackoff(float64(minRetryDelay), float64(h.opts.MaxDelay), retry)
			retry++
		} else {
			retry = 0
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Poll makes one download attempt, within the Timeout. It returns an error when the server could
// not be reached, answered with an error status or did not finish in time; a downloaded bundle
// that is refused is reported (metrics, log, Event) but is not a transport error. Polls are
// serialized, also with those of Start.
func (h *HTTPSource) Poll(ctx context.Context) error {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	attempt, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	done := make(chan struct{})
	h.mu.Lock()
	h.attemptDone = done
	h.mu.Unlock()
	err := h.dl.Trigger(attempt)
	if attempt.Err() != nil && ctx.Err() == nil {
		// Trigger returns as soon as the attempt's context ends, but OPA's download goroutine goes
		// on until it notices and reports to update; the next attempt must not overlap it.
		select {
		case <-done:
		case <-ctx.Done():
		}
		return fmt.Errorf("%s: download did not finish within %s: %w", h.opts.Resource, h.opts.Timeout, attempt.Err())
	}
	if err != nil && isTransportError(err) {
		return err
	}
	return nil
}

// update is the downloader's callback, called once per download attempt.
func (h *HTTPSource) update(_ context.Context, u download.Update) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		if h.attemptDone != nil {
			close(h.attemptDone)
			h.attemptDone = nil
		}
	}()
	if u.Error == nil || !isTransportError(u.Error) {
		h.st.sourceAnswered(h.opts.Name)
	}
	switch {
	case u.Error != nil && errors.Is(u.Error, context.DeadlineExceeded):
		h.st.sourceError(h.opts.Name, fmt.Errorf("%s: download did not finish within %s: %w", h.opts.Resource, h.opts.Timeout, u.Error))
	case u.Error != nil && isTransportError(u.Error):
		h.st.sourceError(h.opts.Name, u.Error)
	case u.Error != nil:
		// The downloader parsed the bundle and refused it (bad signature, unreadable archive).
		h.st.refuse(h.opts.Name, fmt.Errorf("%s: bundle refused: %w", h.opts.Resource, u.Error))
	case u.Bundle == nil:
		// 304 Not Modified (or an empty 200): the bundle in use stays, nothing to activate.
	default:
		raw, err := io.ReadAll(u.Raw)
		if err != nil {
			h.st.sourceError(h.opts.Name, err)
			return nil
		}
		sum := digest(raw)
		if h.handled && sum == h.last {
			return nil // the same bytes again from a server that ignores If-None-Match
		}
		h.handled, h.last = true, sum
		// The downloader already verified with the same keys; bundles.ReadBytes is the check that
		// also refuses unsigned bundles and is shared with every other source.
		b, err := bundles.ReadBytes(h.opts.URL+"/"+h.opts.Resource, raw, h.opts.Verification)
		if err != nil {
			h.st.refuse(h.opts.Name, err)
			return nil
		}
		b.Etag = u.ETag
		if err := h.st.SetBundle(h.opts.Name, b); err != nil {
			h.st.refuse(h.opts.Name, err)
			return nil
		}
		h.offered = true
		if err := h.p.save(raw, u.ETag); err != nil {
			h.st.log.Error(err, "persisting bundle failed", "source", h.opts.Name)
		}
	}
	return nil
}

// restore offers the persisted bundle and primes the downloader with its ETag, so an unchanged
// server answers 304 instead of sending the bundle again.
func (h *HTTPSource) restore() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.offered || !h.p.enabled() {
		return
	}
	b, raw, etag, err := readPersisted(h.p, h.opts.Verification)
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
	h.handled, h.last = true, digest(raw)
	h.dl.SetCache(etag)
	h.st.log.Info("using the persisted bundle until the server answers", "source", h.opts.Name, "revision", b.Manifest.Revision, "etag", etag)
}

// isTransportError tells a server that could not be reached or answered an error status (the
// last good bundle stays, nothing was refused) from a bundle that arrived and was refused.
func isTransportError(err error) bool {
	var he download.HTTPError
	var ue *url.Error
	return errors.As(err, &he) || errors.As(err, &ue) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

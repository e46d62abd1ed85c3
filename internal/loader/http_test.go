package loader

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/bundles"
)

// bundleServer is an OPA bundle service: it serves one bundle with an ETag and answers 304 to a
// request naming that ETag in If-None-Match, unless it is told to send no ETag or to ignore
// If-None-Match, as some servers do.
type bundleServer struct {
	*httptest.Server
	mu          sync.Mutex
	body        []byte
	etag        string
	version     int
	noETag      bool
	ignoreINM   bool
	ifNoneMatch []string // what each request sent
	statuses    []int
}

func newBundleServer(t *testing.T) *bundleServer {
	s := &bundleServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Path != "/bundles/gates.tar.gz" {
			s.statuses = append(s.statuses, http.StatusNotFound)
			http.NotFound(w, r)
			return
		}
		s.ifNoneMatch = append(s.ifNoneMatch, r.Header.Get("If-None-Match"))
		if !s.noETag && !s.ignoreINM && r.Header.Get("If-None-Match") == s.etag {
			s.statuses = append(s.statuses, http.StatusNotModified)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		s.statuses = append(s.statuses, http.StatusOK)
		if !s.noETag {
			w.Header().Set("ETag", s.etag)
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *bundleServer) serve(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	s.body, s.etag = body, fmt.Sprintf(`"v%d"`, s.version)
}

func (s *bundleServer) last() (ifNoneMatch string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ifNoneMatch[len(s.ifNoneMatch)-1], s.statuses[len(s.statuses)-1]
}

func (s *bundleServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.statuses)
}

func newHTTPSource(t *testing.T, h *harness, url string, v *bundles.Verification, persist string) *HTTPSource {
	t.Helper()
	src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: url, Resource: "bundles/gates.tar.gz", Verification: v, PersistDir: persist})
	require.NoError(t, err)
	return src
}

func TestHTTPSourceETagAndUpdates(t *testing.T) {
	priv, _, _ := testKeys(t)
	srv := newBundleServer(t)
	srv.serve(tarGz(t, sign(t, gateFiles("h1", "http one"), priv, nil)))
	h := newHarness(t, Options{})
	src := newHTTPSource(t, h, srv.URL, testVerification(t, ""), t.TempDir())
	assert.False(t, src.NeedLeaderElection())
	ctx := context.Background()

	require.NoError(t, src.Poll(ctx))
	readyWith(t, h)
	denied(t, h, "http one")
	inm, status := srv.last()
	assert.Equal(t, "", inm)
	assert.Equal(t, http.StatusOK, status)

	// Unchanged: the ETag goes back, the server answers 304, nothing is activated again.
	compiles := h.compiles(resultSuccess)
	require.NoError(t, src.Poll(ctx))
	inm, status = srv.last()
	assert.Equal(t, `"v1"`, inm)
	assert.Equal(t, http.StatusNotModified, status)
	assert.Equal(t, 1.0, h.activations("gates", resultSuccess))
	assert.Equal(t, compiles, h.compiles(resultSuccess))

	srv.serve(tarGz(t, sign(t, gateFiles("h2", "http two"), priv, nil)))
	require.NoError(t, src.Poll(ctx))
	_, status = srv.last()
	assert.Equal(t, http.StatusOK, status)
	denied(t, h, "http two")
	eventually(t, func() bool { return h.activations("gates", resultSuccess) == 2 }, "second activation")
	require.NoError(t, src.Poll(ctx))
	inm, _ = srv.last()
	assert.Equal(t, `"v2"`, inm)
}

func TestHTTPSourceRefusesBadBundles(t *testing.T) {
	priv, _, otherPriv := testKeys(t)
	srv := newBundleServer(t)
	srv.serve(tarGz(t, sign(t, gateFiles("h1", "good"), priv, nil)))
	h := newHarness(t, Options{})
	src := newHTTPSource(t, h, srv.URL, testVerification(t, ""), t.TempDir())
	ctx := context.Background()
	require.NoError(t, src.Poll(ctx))
	readyWith(t, h)
	denied(t, h, "good")
	h.drainEvents()

	tampered := sign(t, gateFiles("h2", "tampered"), priv, nil)
	tampered["gates/gates.rego"] = strings.Replace(tampered["gates/gates.rego"], "tampered", "evil", 1)
	for i, c := range []struct {
		name, wantErr string
		files         map[string]string
	}{
		{"tampered", "digest mismatch", tampered},
		{"unsigned", "bundle missing .signatures.json", gateFiles("h3", "unsigned")},
		{"another key", "failed to verify", sign(t, gateFiles("h4", "other key"), otherPriv, nil)},
	} {
		srv.serve(tarGz(t, c.files))
		require.NoError(t, src.Poll(ctx), "%s: a refused bundle is not a transport error", c.name)
		assert.Equal(t, float64(i+1), h.activations("gates", resultFailure), c.name)
		evs := strings.Join(h.drainEvents(), "\n")
		assert.Contains(t, evs, "Warning BundleActivationFailed", c.name)
		assert.Contains(t, evs, c.wantErr, c.name)
		denied(t, h, "good")
	}
	assert.Zero(t, h.sourceErrors("gates"))
}

// Without verification keys bundles are taken as they are and read as a FileSource reads them:
// Rego tests beside the policies are left out, and a signature is not looked at. OPA's downloader,
// which parsed HTTP bundles before, refused both ("do not permit 'package gates_test'",
// "verification key not provided").
func TestHTTPSourceUnverified(t *testing.T) {
	priv, _, _ := testKeys(t)
	srv := newBundleServer(t)
	h := newHarness(t, Options{})
	src := newHTTPSource(t, h, srv.URL, nil, "")
	srv.serve(tarGz(t, gateFiles("u1", "with tests")))
	require.NoError(t, src.Poll(context.Background()))
	readyWith(t, h)
	denied(t, h, "with tests")

	srv.serve(tarGz(t, sign(t, gateFiles("u2", "signed"), priv, nil)))
	require.NoError(t, src.Poll(context.Background()))
	denied(t, h, "signed")
	assert.Zero(t, h.activations("gates", resultFailure))
}

// A restart while the bundle server is down serves the persisted bundle; once the server is back,
// the persisted ETag makes it answer 304.
func TestHTTPSourceServerDownAtStart(t *testing.T) {
	priv, _, _ := testKeys(t)
	persist := t.TempDir()
	srv := newBundleServer(t)
	srv.serve(tarGz(t, sign(t, gateFiles("p1", "persisted"), priv, nil)))
	first := newHarness(t, Options{})
	require.NoError(t, newHTTPSource(t, first, srv.URL, testVerification(t, ""), persist).Poll(context.Background()))
	assert.FileExists(t, filepath.Join(persist, "gates", "bundle.tar.gz"))

	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	h := newHarness(t, Options{})
	src := newHTTPSource(t, h, downURL, testVerification(t, ""), persist)
	runUntilCleanup(t, src.Start)
	readyWith(t, h)
	denied(t, h, "persisted")
	eventually(t, func() bool { return h.sourceErrors("gates") >= 1 }, "the unreachable server is a source error")
	assert.Zero(t, h.activations("gates", resultFailure), "nothing was refused")
	require.Error(t, src.Poll(context.Background()), "a transport error makes Start back off")

	// Back up, same bundle: the restored ETag is sent and answered with 304.
	h2 := newHarness(t, Options{})
	src2 := newHTTPSource(t, h2, srv.URL, testVerification(t, ""), persist)
	src2.restore()
	require.NoError(t, src2.Poll(context.Background()))
	inm, status := srv.last()
	assert.Equal(t, `"v1"`, inm)
	assert.Equal(t, http.StatusNotModified, status)
	readyWith(t, h2)
	denied(t, h2, "persisted")
}

func TestHTTPSourceErrorStatus(t *testing.T) {
	srv := newBundleServer(t)
	h := newHarness(t, Options{})
	src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: srv.URL, Resource: "missing.tar.gz"})
	require.NoError(t, err)
	require.ErrorContains(t, src.Poll(context.Background()), "Not Found")
	assert.Equal(t, 1.0, h.sourceErrors("gates"))
	assert.Zero(t, h.activations("gates", resultFailure))

	_, err = NewHTTPSource(h.st, HTTPOptions{Name: "x", URL: srv.URL})
	require.ErrorContains(t, err, "URL and Resource are required")
	_, err = NewHTTPSource(h.st, HTTPOptions{Name: "y", URL: srv.URL, Resource: "r", Service: []byte("{")})
	require.ErrorContains(t, err, "service configuration")
}

// The service configuration is OPA's: here a bearer token.
func TestHTTPSourceServiceCredentials(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		_, _ = w.Write(tarGz(t, withoutTests(gateFiles("c1", "with token"))))
	}))
	defer srv.Close()
	h := newHarness(t, Options{})
	src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: srv.URL, Resource: "b.tar.gz",
		Service: []byte(`{"credentials":{"bearer":{"token":"s3cret"}}}`)})
	require.NoError(t, err)
	require.NoError(t, src.Poll(context.Background()))
	assert.Equal(t, "Bearer s3cret", auth)
	readyWith(t, h)
	denied(t, h, "with token")
}

// A server that sends the headers and part of the body, then stalls, held the poller forever
// (OPA's response_header_timeout covers headers only). Now the attempt ends at the Timeout as a
// source error, the last-success gauge stops moving, and the next poll goes through.
func TestHTTPSourceStalledBody(t *testing.T) {
	var stall atomic.Bool
	stall.Store(true)
	release := make(chan struct{})
	body := tarGz(t, gateFiles("g1", "from-server"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if stall.Load() {
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			<-release
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // cleanups run last first: the handler returns, then Close

	h := newHarness(t, Options{})
	src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: srv.URL, Resource: "b.tar.gz", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- src.Poll(context.Background()) }()
	select {
	case err := <-done:
		require.Error(t, err, "a stalled download is a transport error, so Start backs off and polls again")
	case <-time.After(10 * time.Second):
		t.Fatal("Poll still waiting for the stalled body")
	}
	assert.InDelta(t, 1, h.sourceErrors("gates"), 0)
	assert.Zero(t, testutil.ToFloat64(h.st.metrics.sourceSuccess.WithLabelValues("gates")), "never answered in full")

	stall.Store(false)
	require.NoError(t, src.Poll(context.Background()))
	assert.Positive(t, testutil.ToFloat64(h.st.metrics.sourceSuccess.WithLabelValues("gates")))
}

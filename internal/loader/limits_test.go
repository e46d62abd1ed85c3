package loader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
)

// bombFiles are 32 files of zeros, each just under bundles.MaxFileSize: 1 GiB that gzip makes
// about 1 MiB of. The string is shared, so the map costs 32 MiB.
func bombFiles() map[string]string {
	zeros := strings.Repeat("\x00", bundles.MaxFileSize-1024)
	files := map[string]string{}
	for i := range 32 {
		files[fmt.Sprintf("bomb/f%02d.rego", i)] = zeros
	}
	return files
}

// BenchmarkHTTPSourceBomb is issue #11's gzip bomb served by a bundle service to a manager with a
// verification key, unsigned and signed with that key: each poll is a new source (nothing
// remembered), and B/op is what downloading and refusing the bomb allocates.
func BenchmarkHTTPSourceBomb(b *testing.B) {
	priv, _, _ := testKeys(b)
	v := testVerification(b, "")
	files := bombFiles()
	for _, c := range []struct {
		name string
		raw  []byte
	}{
		{"unsigned", tarGz(b, files)},
		{"signed", tarGz(b, sign(b, files, priv, nil))},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(c.raw) }))
			defer srv.Close()
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			st, err := New(&engine.Engine{}, Options{Metrics: m, Logger: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				src, err := NewHTTPSource(st, HTTPOptions{Name: fmt.Sprintf("bomb-%d", i), URL: srv.URL, Resource: "b.tar.gz", Verification: v})
				if err != nil {
					b.Fatal(err)
				}
				if err := src.Poll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if testutil.ToFloat64(st.metrics.activations.WithLabelValues("bomb-0", resultFailure)) != 1 {
				b.Fatal("the bomb was not refused")
			}
			b.ReportMetric(float64(len(c.raw))/(1<<10), "gzip-KiB")
		})
	}
}

// smallLimits make the tests' bundles large with a few KiB.
var smallLimits = bundles.Limits{ArchiveBytes: 64 << 10, FileBytes: 16 << 10, TotalBytes: 48 << 10}

// randomText is n bytes of hex from n/2 random bytes: gzip makes about n/2 bytes of it.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// withFiles is gateFiles("big", ...) plus files.
func withFiles(files map[string]string) map[string]string {
	out := gateFiles("big", "big")
	maps.Copy(out, files)
	return out
}

// jsonOf is a data file of n bytes.
func jsonOf(n int) string { return `{"x":"` + strings.Repeat("a", n-8) + `"}` }

// Each limit refuses the bundle while it is downloaded or read, once, naming the bundle, the file
// inside it and the limit; the last good bundle keeps serving and the source is not in error. A
// server that sends a bundle without end is cut at the download limit.
func TestHTTPSourceLimits(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string // nil: a body without end
		wantErr string
	}{
		{"download", withFiles(map[string]string{"gates/noise.rego": randomText(t, 160<<10)}), "the archive is over the size limit of 65536 bytes compressed"},
		{"body without end", nil, "the archive is over the size limit of 65536 bytes compressed"},
		{"file", withFiles(map[string]string{"gates/data.json": jsonOf(20 << 10)}), `file "gates/data.json" is over the size limit of 16384 bytes per file (decompressed)`},
		{"total", withFiles(map[string]string{"gates/a/data.json": jsonOf(15 << 10), "gates/b/data.json": jsonOf(15 << 10), "gates/c/data.json": jsonOf(15 << 10), "gates/d/data.json": jsonOf(15 << 10)}),
			`over the size limit of 49152 bytes in total (decompressed), at file "gates/d/data.json"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			endless := make([]byte, 32<<10)
			_, _ = rand.Read(endless)
			var body []byte
			if c.files != nil {
				body = tarGz(t, c.files)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if body != nil {
					_, _ = w.Write(body)
					return
				}
				for r.Context().Err() == nil {
					if _, err := w.Write(endless); err != nil {
						return
					}
				}
			}))
			t.Cleanup(srv.Close)
			h := newHarness(t, Options{})
			src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: srv.URL, Resource: "b.tar.gz", Limits: smallLimits, Timeout: 20 * time.Second})
			require.NoError(t, err)
			for range 2 {
				require.NoError(t, src.Poll(context.Background()), "a refused bundle is not a transport error")
			}
			assert.Equal(t, 1.0, h.activations("gates", resultFailure))
			assert.Zero(t, h.sourceErrors("gates"))
			evs := strings.Join(h.drainEvents(), "\n")
			assert.Contains(t, evs, srv.URL+"/b.tar.gz: bundle refused: too large: ")
			assert.Contains(t, evs, c.wantErr)
		})
	}
}

// A refused bundle is downloaded, logged and recorded once: the next polls send its ETag, and a
// 304 (or, from a server without ETags, the same bytes; or, from one ignoring If-None-Match, the
// same ETag) is "still refused", counted but not refused again. OPA's downloader forgot the ETag
// of a bundle it refused, so every poll downloaded, parsed and refused it anew. Another bundle
// ends the refusal.
func TestHTTPSourceRefusedBundleNotDownloadedAgain(t *testing.T) {
	priv, _, _ := testKeys(t)
	for _, c := range []struct {
		name              string
		noETag, ignoreINM bool
		wantStatus        int
	}{
		{"304 to the refused ETag", false, false, http.StatusNotModified},
		{"no ETag, same bytes", true, false, http.StatusOK},
		{"If-None-Match ignored, same ETag", false, true, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newBundleServer(t)
			srv.noETag, srv.ignoreINM = c.noETag, c.ignoreINM
			srv.serve(tarGz(t, gateFiles("u", "unsigned")))
			h := newHarness(t, Options{})
			src := newHTTPSource(t, h, srv.URL, testVerification(t, ""), "")
			for range 3 {
				require.NoError(t, src.Poll(context.Background()))
			}
			inm, status := srv.last()
			assert.Equal(t, c.wantStatus, status)
			if !c.noETag {
				assert.Equal(t, `"v1"`, inm, "the refused bundle's ETag is sent")
			}
			assert.Equal(t, 1.0, h.activations("gates", resultFailure), "refused once")
			assert.Len(t, h.drainEvents(), 1, "one Event")
			assert.Equal(t, 1.0, h.refused("gates"))
			assert.Equal(t, 3.0, h.refusedPolls("gates"), "every poll counted")

			srv.serve(tarGz(t, sign(t, gateFiles("s", "signed"), priv, nil)))
			require.NoError(t, src.Poll(context.Background()))
			readyWith(t, h)
			denied(t, h, "signed")
			assert.Zero(t, h.refused("gates"))
			require.NoError(t, src.Poll(context.Background()))
			assert.Equal(t, 3.0, h.refusedPolls("gates"))
		})
	}
}

// Start polls a server offering a refused bundle ever less often: at 2 ms between polls it made
// about 300 requests in 600 ms; doubling up to 50 ms, about 16.
func TestHTTPSourceBacksOffWhileRefused(t *testing.T) {
	srv := newBundleServer(t)
	srv.serve(tarGz(t, gateFiles("u", "unsigned")))
	h := newHarness(t, Options{})
	src, err := NewHTTPSource(h.st, HTTPOptions{Name: "gates", URL: srv.URL, Resource: "bundles/gates.tar.gz", Verification: testVerification(t, ""),
		MinDelay: 2 * time.Millisecond, MaxDelay: 2 * time.Millisecond, RefusedMaxDelay: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	require.NoError(t, src.Start(ctx))
	t.Logf("%d requests", srv.requests())
	assert.Less(t, srv.requests(), 40)
	assert.Equal(t, 1.0, h.activations("gates", resultFailure))
}

func TestPacer(t *testing.T) {
	errDown := errors.New("down")
	p := pacer{min: time.Second, max: 2 * time.Second, refusedMax: 20 * time.Second}
	for i, step := range []struct {
		refused bool
		err     error
		lo, hi  time.Duration // ±20% jitter
	}{
		{false, nil, time.Second, 2 * time.Second},
		{true, nil, 3200 * time.Millisecond, 4800 * time.Millisecond}, // 2 × max
		{true, nil, 6400 * time.Millisecond, 9600 * time.Millisecond},
		{true, nil, 12800 * time.Millisecond, 19200 * time.Millisecond},
		{true, nil, 16 * time.Second, 24 * time.Second}, // refusedMax
		{false, errDown, 0, 0},                          // OPA's backoff retries at once, then
		{false, errDown, 128 * time.Millisecond, 192 * time.Millisecond},
		{true, nil, 16 * time.Second, 24 * time.Second}, // an error in between does not reset the back-off
		{false, nil, time.Second, 2 * time.Second},      // a success does
		{true, nil, 3200 * time.Millisecond, 4800 * time.Millisecond},
	} {
		d := p.next(step.refused, step.err)
		assert.True(t, d >= step.lo && d <= step.hi, "step %d: %s not in [%s, %s]", i, d, step.lo, step.hi)
	}
}

// A FileSource refuses a bundle over the limits once, naming the path, the file and the limit, and
// counts every poll that finds it unchanged.
func TestFileSourceLimits(t *testing.T) {
	for _, c := range []struct {
		name    string
		write   func(path string)
		wantErr string
	}{
		{"tarball", func(path string) {
			require.NoError(t, os.WriteFile(path+".tar.gz", []byte(randomText(t, 80<<10)), 0o600))
		}, "the archive is over the size limit of 65536 bytes compressed"},
		{"directory, file", func(path string) {
			writeDir(t, path, withFiles(map[string]string{"gates/data.json": jsonOf(20 << 10)}))
		},
			`file "gates/data.json" is over the size limit of 16384 bytes per file (decompressed)`},
		{"directory, total", func(path string) {
			writeDir(t, path, withFiles(map[string]string{"gates/a/data.json": jsonOf(15 << 10), "gates/b/data.json": jsonOf(15 << 10), "gates/c/data.json": jsonOf(15 << 10), "gates/d/data.json": jsonOf(15 << 10)}))
		}, "over the size limit of 49152 bytes in total (decompressed)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gates")
			c.write(path)
			if _, err := os.Stat(path); err != nil {
				path += ".tar.gz"
			}
			h := newHarness(t, Options{})
			src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: path, Limits: smallLimits})
			require.NoError(t, err)
			for range 3 {
				src.Poll()
			}
			assert.Equal(t, 1.0, h.activations("gates", resultFailure))
			assert.Zero(t, h.sourceErrors("gates"))
			assert.Equal(t, 1.0, h.refused("gates"))
			assert.Equal(t, 3.0, h.refusedPolls("gates"))
			evs := strings.Join(h.drainEvents(), "\n")
			assert.Contains(t, evs, path+": bundle refused: too large: ")
			assert.Contains(t, evs, c.wantErr)
		})
	}
}

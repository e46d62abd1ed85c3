//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/internal/testing/fleet"
	"github.com/sidecarops/sidecarops/webhook"
)

// containerLimit is the manager container's memory limit (config/manager/deployment.yaml), of which
// the manager sets 90% as the Go soft memory limit (--memory-limit's default).
const containerLimit = 512 << 20

// BenchmarkHostilePeers reports the peak resident memory of this process — a webhook server
// configured as the manager's (default webhook.Limits, the soft memory limit at 90% of the
// container limit) plus the attacking client — while peers that can reach the port try to exhaust
// its memory:
//
//   - trickle: 200 TLS connections each declare a 7 MiB review, send 64 KiB, then 1 KiB every
//     100 ms for 3 s. Before the webhook read bodies as they arrive, each such connection made
//     the server allocate the declared 7 MiB at once.
//   - large: 64 concurrent valid reviews of a 6 MB pod (a 6 MB annotation). Admissions beyond
//     Limits.InFlightBytes are answered 429 at once instead of all being decoded together.
//   - other-paths: 4 connections declaring 7 MiB to /convert and 60 declaring 8 KiB to the
//     SidecarSet paths, each sending a byte a second for 9 s, while an ordinary pod review is sent
//     every 100 ms: how many were answered, and how many refused 429. The other paths once shared
//     the pod path's room and took it by declared size.
//   - convert-growing: one chunked ConversionReview whose one string grows to 1 GiB. /convert
//     once read it without bound.
//
// Run it once per case: go test -run '^$' -bench HostilePeers -benchtime 1x ./hack/loadgen/
func BenchmarkHostilePeers(b *testing.B) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(containerLimit * 9 / 10))
	sets, err := fleet.SidecarSets(100, 1)
	require.NoError(b, err)
	srv, err := startServer(context.Background(), sets, false)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, srv.stop()) })
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: srv.pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64,
	}}
	ordinary := mustReview(b, fleet.Pod())

	b.Run("trickle=200", func(b *testing.B) {
		for b.Loop() {
			peak := watchRSS(b)
			var wg sync.WaitGroup
			for range 200 {
				wg.Go(func() { trickle(b, srv, srv.url, 7<<20, 64<<10, 1<<10, 100*time.Millisecond, 3*time.Second) })
			}
			time.Sleep(time.Second) // every trickler is connected and sending
			code, err := post(client, srv.url, ordinary)
			require.NoError(b, err)
			require.Equal(b, http.StatusOK, code, "an ordinary review is answered during the attack")
			wg.Wait()
			reportPeak(b, peak())
		}
	})

	b.Run("large=64x6MB", func(b *testing.B) {
		pod := fleet.Pod()
		pod.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 6<<20)}
		large := mustReview(b, pod)
		for b.Loop() {
			peak := watchRSS(b)
			var ok, throttled atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					code, err := post(client, srv.url, large)
					require.NoError(b, err)
					switch code {
					case http.StatusOK:
						ok.Add(1)
					case http.StatusTooManyRequests:
						throttled.Add(1)
					default:
						b.Errorf("HTTP %d", code)
					}
				})
			}
			wg.Wait()
			reportPeak(b, peak())
			b.ReportMetric(float64(ok.Load()), "answered")
			b.ReportMetric(float64(throttled.Load()), "throttled")
		}
	})

	base := strings.TrimSuffix(srv.url, webhook.PodPath)

	b.Run("other-paths", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { trickle(b, srv, base+webhook.ConvertPath, 7<<20, 1, 1, time.Second, 9*time.Second) })
			}
			for i := range 60 {
				path := []string{webhook.SidecarSetValidatePath, webhook.SidecarSetDefaultPath}[i%2]
				wg.Go(func() { trickle(b, srv, base+path, 8<<10, 1, 1, time.Second, 9*time.Second) })
			}
			time.Sleep(500 * time.Millisecond) // every trickler is connected and sending
			var answered, throttled float64
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				code, err := post(client, srv.url, ordinary)
				require.NoError(b, err)
				switch code {
				case http.StatusOK:
					answered++
				case http.StatusTooManyRequests:
					throttled++
				default:
					b.Errorf("HTTP %d", code)
				}
			}
			wg.Wait()
			b.ReportMetric(answered, "pods-answered")
			b.ReportMetric(throttled, "pods-429")
		}
	})

	b.Run("convert-growing", func(b *testing.B) {
		head := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"r","desiredAPIVersion":"apps.kruise.io/v1beta1",` +
			`"objects":[{"apiVersion":"apps.kruise.io/v1alpha1","kind":"SidecarSet","metadata":{"name":"`
		for b.Loop() {
			peak := watchRSS(b)
			req, err := http.NewRequest(http.MethodPost, base+webhook.ConvertPath, io.MultiReader(strings.NewReader(head), io.LimitReader(letters{}, 1<<30)))
			require.NoError(b, err)
			req.Header.Set("Content-Type", "application/json")
			code := 0
			if resp, err := client.Do(req); err == nil { // the server may cut the connection instead
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				code = resp.StatusCode
			}
			reportPeak(b, peak())
			b.ReportMetric(float64(code), "HTTP-status")
		}
	})
}

// letters is an endless string of a's.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func reportPeak(b *testing.B, peak int64) {
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	if peak >= containerLimit {
		b.Errorf("peak RSS %d MiB reaches the container limit %d MiB", peak>>20, containerLimit>>20)
	}
}

func mustReview(b *testing.B, pod *corev1.Pod) []byte {
	body, _, err := reviewBody(pod)
	require.NoError(b, err)
	return body
}

func post(client *http.Client, url string, body []byte) (int, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Body.Close()
}

// trickle opens its own TLS connection to target, declares a body of size bytes, sends first bytes
// of it at once and then chunk bytes every every until it has spent for, and leaves without
// finishing.
func trickle(b *testing.B, srv *server, target string, size, first, chunk int, every, spend time.Duration) {
	u, err := url.Parse(target)
	require.NoError(b, err)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: srv.pool, MinVersion: tls.VersionTLS12})
	require.NoError(b, err)
	defer conn.Close()
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, size)
	_, _ = w.WriteString(strings.Repeat(" ", first))
	if w.Flush() != nil {
		return // the server cut the connection: that is a defence, not a failure
	}
	for end := time.Now().Add(spend); time.Now().Before(end); time.Sleep(every) {
		if _, err := conn.Write(bytes.Repeat([]byte(" "), chunk)); err != nil {
			return
		}
	}
}

// watchRSS samples this process's resident set every 10 ms until the returned func is called,
// which returns the highest sample.
func watchRSS(b *testing.B) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v := residentBytes(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		if peak.Load() == 0 {
			b.Fatal("no resident-memory sample: /proc/self/status unreadable")
		}
		return peak.Load()
	}
}

// residentBytes is VmRSS of /proc/self/status; 0 if it cannot be read.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

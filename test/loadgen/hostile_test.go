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
//     the server allocate the declared 7 MiB at once (760 MB of heap for 100 connections).
//   - large: 64 concurrent valid reviews of a 6 MB pod (a 6 MB annotation). Admissions beyond
//     Limits.InFlightBytes are answered 429 at once instead of all being decoded together.
//
// Run it once per case: go test -run '^$' -bench HostilePeers -benchtime 1x ./test/loadgen/
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
				wg.Go(func() { trickle(b, srv, 7<<20, 64<<10, 1<<10, 100*time.Millisecond, 3*time.Second) })
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

// trickle opens its own TLS connection, declares a body of size bytes, sends first bytes of it at
// once and then chunk bytes every every until it has spent for, and leaves without finishing.
func trickle(b *testing.B, srv *server, size, first, chunk int, every, spend time.Duration) {
	u, err := url.Parse(srv.url)
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

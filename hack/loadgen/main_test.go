package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/internal/testing/fleet"
)

func TestTargetURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // the URL used; "" when refused
	}{
		{"https://127.0.0.1:9443/mutate-pod", "https://127.0.0.1:9443/mutate-pod"},
		{"https://127.0.0.1:9443", "https://127.0.0.1:9443/mutate-pod"},
		{"https://127.0.0.1:9443/", "https://127.0.0.1:9443/mutate-pod"},
		{"https://127.8.9.10:9443/other", "https://127.8.9.10:9443/other"},
		{"https://[::1]:9443/mutate-pod", "https://[::1]:9443/mutate-pod"},
		{"https://[::ffff:127.0.0.1]:9443/mutate-pod", "https://[::ffff:127.0.0.1]:9443/mutate-pod"},
		{"https://localhost:9443/mutate-pod", "https://localhost:9443/mutate-pod"},
		{"https://LOCALHOST.:9443/mutate-pod", "https://LOCALHOST.:9443/mutate-pod"},
		{"http://127.0.0.1:9443/mutate-pod", ""},              // not TLS
		{"https://127.0.0.1/mutate-pod", ""},                  // no port
		{"https://10.0.0.1:9443/mutate-pod", ""},              // private, not loopback
		{"https://0.0.0.0:9443/mutate-pod", ""},               // unspecified
		{"https://[::]:9443/mutate-pod", ""},                  // unspecified
		{"https://192.168.1.5:9443/mutate-pod", ""},           // LAN
		{"https://example.com:9443/mutate-pod", ""},           // a name other than localhost is not resolved
		{"https://localhost.example.com:9443/mutate-pod", ""}, // only the name localhost itself
		{"https://127.0.0.1.nip.io:9443/mutate-pod", ""},      // a name that merely looks loopback
		{"https://2130706433:9443/mutate-pod", ""},            // 127.0.0.1 as an integer: not an IP literal here
		{"https://[::ffff:10.0.0.1]:9443/mutate-pod", ""},
		{"127.0.0.1:9443", ""},
		{"", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := targetURL(tc.url)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted as %s, want refused", u)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if u.String() != tc.want {
				t.Fatalf("got %s, want %s", u, tc.want)
			}
		})
	}
}

// TestLoopbackOnly: whatever a name resolved to, the dialer connects to loopback addresses only.
func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9443":        true,
		"127.255.0.3:1":         true,
		"[::1]:9443":            true,
		"[::ffff:127.0.0.1]:80": true,
		"10.0.0.1:9443":         false,
		"[2001:db8::1]:443":     false,
		"0.0.0.0:9443":          false,
		"localhost:9443":        false, // the hook sees resolved addresses only
	} {
		if err := loopbackOnly("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("%s: error %v, want allowed=%v", addr, err, ok)
		}
	}
}

func TestParseFlagsBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--duration", "5m"}, true},
		{[]string{"--duration", "5m1s"}, false},
		{[]string{"--duration", "0s"}, false},
		{[]string{"--matching", "2", "--sidecarsets", "1"}, false},
		{[]string{"--url", "https://10.1.2.3:9443"}, false},
		{[]string{"--url", "https://127.0.0.1:9443", "--sidecarsets", "1000"}, false},
		{[]string{"--url", "https://127.0.0.1:9443", "--server-name", "sidecarops-webhook.sidecarops-system.svc"}, true},
		{[]string{"--server-name", "x"}, false},
		{[]string{"--http", "3"}, false},
		{[]string{"--concurrency", "-1"}, false},
	} {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if (err == nil) != tc.ok {
			t.Errorf("%v: error %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted: summarize sorts
	}
	for _, tc := range []struct {
		name               string
		lats               []time.Duration
		p50, p90, p99, max time.Duration
	}{
		{"none", nil, 0, 0, 0, 0},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(2, 1), 1 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
		// Nearest rank: p50 of 1..100 is the 50th value, p99 the 99th, never an interpolation.
		{"1..100", ms(hundred...), 50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		// One slow request in 100 is the max, not the p99; two are the p99.
		{"one outlier", ms(append(make([]int, 99), 1000)...), 0, 0, 0, time.Second},
		{"two outliers", ms(append(make([]int, 98), 1000, 1000)...), 0, 0, time.Second, time.Second},
		{"ten", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 5 * time.Millisecond, 9 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarize(tc.lats)
			got := []time.Duration{s.p50, s.p90, s.p99, s.max}
			want := []time.Duration{tc.p50, tc.p90, tc.p99, tc.max}
			for i, name := range []string{"p50", "p90", "p99", "max"} {
				if got[i] != want[i] {
					t.Errorf("%s = %s, want %s", name, got[i], want[i])
				}
			}
			if s.n != len(tc.lats) {
				t.Errorf("n = %d, want %d", s.n, len(tc.lats))
			}
		})
	}
}

func TestStampUID(t *testing.T) {
	uid := []byte(uidTemplate)
	stampUID(uid, 0xab, 0x123456789abcdef)
	if got, want := string(uid), "000000ab-0000-4000-8000-456789abcdef"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestInProcessRun runs the command end to end on a small fleet: server, TLS, HTTP/2 and
// HTTP/1.1, alike and distinct pods, every answer checked, the report printed, exit status 0.
func TestInProcessRun(t *testing.T) {
	for _, tc := range []struct {
		proto string
		pods  string // the --distinct-pods value
		want  string
	}{
		{"2", "false", "pods:        burst"},
		{"1.1", "false", "pods:        burst"},
		{"2", "true", "pods:        distinct"},
	} {
		t.Run("http="+tc.proto+",distinct="+tc.pods, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{
				"--sidecarsets", "10", "--requests", "40", "--warmup", "0", "--floor=false", "--http", tc.proto, "--distinct-pods=" + tc.pods,
			}, &out, &errOut)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
			}
			wants := []string{"admissions:  40 in", "errors:      0", "HTTP/" + map[string]string{"2": "2.0", "1.1": "1.1"}[tc.proto], "TLS 1.3", tc.want}
			if os.Getenv("GOGC") == "" {
				wants = append(wants, "runtime:     --gc-percent=400")
			}
			for _, want := range wants {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// With --distinct-pods every request's pod differs from every other's in its label, which holds
// the request's uid; without, the pods are alike and only the request uids differ.
func TestDistinctPods(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		pod := admissionPod()
		if distinct {
			pod.Labels[distinctLabel] = uidTemplate
		}
		body, uidAt, err := reviewBody(pod)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for id := range uint32(3) {
			w := newWorker(id, nil, "", body, uidAt, true)
			for range 3 {
				b, uid := w.next()
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(b, &review); err != nil {
					t.Fatal(err)
				}
				var sent corev1.Pod
				if err := json.Unmarshal(review.Request.Object.Raw, &sent); err != nil {
					t.Fatal(err)
				}
				if string(review.Request.UID) != string(uid) || seen[string(uid)] {
					t.Fatalf("request uid %s, stamped %s, seen before: %v", review.Request.UID, uid, seen[string(uid)])
				}
				seen[string(uid)] = true
				label, has := sent.Labels[distinctLabel]
				if has != distinct || (distinct && label != string(uid)) {
					t.Fatalf("distinct %v: pod label %q (present: %v), request uid %s", distinct, label, has, uid)
				}
			}
		}
	}
}

// TestURLTarget runs the command against a server it did not start, trusting that server's CA
// from a file, as against a manager.
func TestURLTarget(t *testing.T) {
	sets, err := fleet.SidecarSets(10, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startServer(context.Background(), sets, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.stop(); err != nil {
			t.Error(err)
		}
	})
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{
		"--url", srv.url, "--ca-file", srv.caFile, "--requests", "20", "--warmup", "0", "--floor=false",
	}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	for _, want := range []string{"fleet: the server's own", "admissions:  20 in", "errors:      0", "client only"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	// Without the CA the certificate is not trusted: the first admission fails, exit status 1.
	code = run(context.Background(), []string{"--url", srv.url, "--requests", "1", "--floor=false"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "certificate") {
		t.Fatalf("exit %d, want 1 with a certificate error: %s", code, errOut.String())
	}
}

// BenchmarkAdmissionOverHTTPS is one pod admission over HTTPS (HTTP/2, as the API server calls
// webhooks) against the in-process webhook server, with inFlightPerCPU requests in flight per CPU
// (RunParallel goroutines), 1 SidecarSet of the fleet matching. ns/op is wall time per admission
// with that many in flight (1/throughput); p50/p99 are the latencies of every request.
//
//	go test -run '^$' -bench AdmissionOverHTTPS -benchtime 10s ./hack/loadgen/
func BenchmarkAdmissionOverHTTPS(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv("GOGC") == "" {
		// The manager's GC setting, as the command's default.
		defer debug.SetGCPercent(debug.SetGCPercent(managerGCPercent))
	}
	ctx := context.Background()
	body, uidAt, err := reviewBody(admissionPod())
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000} {
		sets, err := fleet.SidecarSets(n, 1)
		if err != nil {
			b.Fatal(err)
		}
		// One server per fleet size, shared by the benchmark's rounds (b.N probes).
		srv, err := startServer(ctx, sets, true)
		if err != nil {
			b.Fatal(err)
		}
		var dials atomic.Int64
		client := newClient(clientOptions{pool: srv.pool, http2: true, conns: 64}, &dials)
		b.Run(fmt.Sprintf("sidecarsets=%d", n), func(b *testing.B) {
			var ids atomic.Uint32
			if _, err := newWorker(0, client, srv.url, body, uidAt, true).do(ctx); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var all []time.Duration
			b.SetParallelism(inFlightPerCPU)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := newWorker(ids.Add(1), client, srv.url, body, uidAt, true)
				var lats []time.Duration
				for pb.Next() {
					a, err := w.do(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					lats = append(lats, a.rtt)
				}
				mu.Lock()
				all = append(all, lats...)
				mu.Unlock()
			})
			b.StopTimer()
			s := summarize(all)
			b.ReportMetric(float64(s.p50)/1e3, "p50-µs")
			b.ReportMetric(float64(s.p99)/1e3, "p99-µs")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
		})
		client.CloseIdleConnections()
		if err := srv.stop(); err != nil {
			b.Error(err)
		}
	}
}

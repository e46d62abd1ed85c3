package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile of sorted latencies: the smallest recorded value
// such that at least p% of all are ≤ it. Every latency is recorded, so this is exact, not a
// histogram's approximation. Zero for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencySummary is the distribution of one run's successful admissions.
type latencySummary struct {
	n                  int
	p50, p90, p99, max time.Duration
}

// summarize sorts lats in place and reads the percentiles.
func summarize(lats []time.Duration) latencySummary {
	slices.Sort(lats)
	s := latencySummary{n: len(lats), p50: percentile(lats, 50), p90: percentile(lats, 90), p99: percentile(lats, 99)}
	if len(lats) > 0 {
		s.max = lats[len(lats)-1]
	}
	return s
}

// Target of the issue, at 100 SidecarSets on the 2-core machine.
const (
	targetRate = 5000.0
	targetP99  = 2 * time.Millisecond
)

// noisyCPUs is how much CPU other processes may use during a run (kernel threads, an idle
// cluster's housekeeping) before its figures are flagged as unreliable.
const noisyCPUs = 0.1

// report is everything printed after a run.
type report struct {
	target      string // where the requests went
	inProcess   bool
	sidecarSets int
	matching    int
	distinct    bool // every pod has a label of its own (--distinct-pods)
	compile     time.Duration
	protocol    string
	tlsVersion  string
	conns       int64
	concurrency int
	rate        float64
	bodyBytes   int
	gomaxprocs  int
	numCPU      int
	runtimeEnv  string // GOGC, GOMEMLIMIT, GODEBUG when set: they change the figures
	elapsed     time.Duration
	ok          int
	latency     latencySummary
	errors      errorCounts
	cpu         time.Duration // process CPU (user+sys) during the run; 0: unknown
	others      time.Duration // CPU other processes of the machine used during the run
	floor       benchFigure
	handler     benchFigure // the pod handler in-process, without the network; zero with --url
}

// benchFigure is one in-process measure (testing.Benchmark).
type benchFigure struct {
	ns     float64
	allocs int64
	bytes  int64
}

func (r *report) throughput() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r *report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	if r.inProcess {
		p("target:      in-process controller-runtime webhook server %s (%s, %s)", r.target, r.protocol, r.tlsVersion)
		p("fleet:       %d SidecarSets, %d matching the pod (snapshot compiled in %s)", r.sidecarSets, r.matching, r.compile.Round(time.Millisecond))
		p("CPUs:        GOMAXPROCS=%d of %d CPUs, shared by the client and the server in this one process:", r.gomaxprocs, r.numCPU)
		p("             the client's TLS, HTTP and response checks take CPU from the webhook")
	} else {
		p("target:      %s (%s, %s); fleet: the server's own", r.target, r.protocol, r.tlsVersion)
		p("CPUs:        GOMAXPROCS=%d of %d CPUs for this client; the server's share depends on where it runs", r.gomaxprocs, r.numCPU)
	}
	if r.runtimeEnv != "" {
		p("runtime:     %s", r.runtimeEnv)
	}
	load := fmt.Sprintf("closed loop, %d in flight", r.concurrency)
	if r.rate > 0 {
		load = fmt.Sprintf("open loop at %s/s, up to %d in flight", thousands(r.rate), r.concurrency)
	}
	p("load:        %s, %d connection(s), AdmissionReview of %d bytes, a fresh uid per request", load, r.conns, r.bodyBytes)
	if r.distinct {
		p("pods:        distinct: a label of its own per pod, the per-pod cache never answers")
	} else {
		p("pods:        burst: alike but for uid, as a ReplicaSet's; the per-pod cache answers after the second")
	}
	p("admissions:  %s in %s = %s/s", thousands(float64(r.ok)), r.elapsed.Round(time.Millisecond), thousands(r.throughput()))
	l := r.latency
	p("latency:     p50 %s  p90 %s  p99 %s  max %s  (all %d successful admissions recorded)",
		ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max), l.n)
	p("errors:      %d", r.errors.total())
	kinds := make([]string, 0, len(r.errors))
	for k := range r.errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		p("             %s: %d, first: %v", k, r.errors[k].n, r.errors[k].first)
	}
	if r.cpu > 0 && r.ok > 0 {
		who := "client + server"
		if !r.inProcess {
			who = "client only"
		}
		per := r.cpu / time.Duration(r.ok+r.errors.total())
		p("CPU:         %s per admission (%s, user+sys); %d CPUs allow at most %s/s at that cost",
			us(per), who, r.gomaxprocs, thousands(float64(r.gomaxprocs)*float64(time.Second)/float64(per)))
	}
	if r.cpu > 0 {
		cpus := func(d time.Duration) float64 { return d.Seconds() / r.elapsed.Seconds() }
		note := ""
		if cpus(r.others) > noisyCPUs {
			note = "  NOISY: other processes took CPU from the run, rerun on a quiet machine"
		}
		p("machine:     %.2f CPUs busy on average: %.2f this process, %.2f other processes%s",
			cpus(r.cpu+r.others), cpus(r.cpu), cpus(r.others), note)
	}
	if r.floor.ns > 0 {
		p("floor:       %s per JSON decode+encode of the same AdmissionReview (encoding/json: decode the request with the pod raw, encode the response with this run's patch), %d allocs",
			us(time.Duration(r.floor.ns)), r.floor.allocs)
	}
	if r.handler.ns > 0 {
		p("handler:     %s per admission through the server's own http.Handler in-process, no TLS, no network (review and pod decoding, decision, injection, patch, encoding), %d allocs",
			us(time.Duration(r.handler.ns)), r.handler.allocs)
	}
	p("verdict:     the issue's target, ≥ %s/s with p99 ≤ %s (set at 100 SidecarSets on 2 CPUs): %s", thousands(targetRate), ms(targetP99), r.verdict())
}

// verdict compares the run with the target, by how much when it misses.
func (r *report) verdict() string {
	var misses []string
	if rate := r.throughput(); rate < targetRate {
		misses = append(misses, fmt.Sprintf("throughput %.0f%% under", 100*(1-rate/targetRate)))
	}
	if r.latency.p99 > targetP99 {
		misses = append(misses, fmt.Sprintf("p99 %.0f%% over", 100*(float64(r.latency.p99)/float64(targetP99)-1)))
	}
	if r.errors.total() > 0 {
		misses = append(misses, "errors")
	}
	if len(misses) == 0 {
		return "met by this run"
	}
	return "missed by this run: " + strings.Join(misses, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

// thousands formats a count or rate rounded to a whole number with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

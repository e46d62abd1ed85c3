package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync/atomic"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/internal/testing/fleet"
	"github.com/sidecarops/sidecarops/webhook"
)

// maxDuration bounds a run: this is a shared machine.
const maxDuration = 5 * time.Minute

// inFlightPerCPU is the default number of requests in flight per CPU (GOMAXPROCS); see
// docs/benchmarks.md ("The webhook over HTTPS") for the runs that chose it.
const inFlightPerCPU = 2

// config is the command line.
type config struct {
	sidecarSets int
	matching    int
	concurrency int // 0: 2×GOMAXPROCS
	duration    time.Duration
	warmup      time.Duration
	requests    int64
	rate        float64
	url         string
	caFile      string
	serverName  string
	http        string
	cpus        int
	decisionLog bool
	distinct    bool
	floor       bool
	cpuProfile  string
	trace       string
	gcPercent   int
}

// managerGCPercent is sidecarops-manager's --gc-percent default (cmd/sidecarops-manager
// DefaultGCPercent, a main package this one cannot import): the in-process server runs with the GC
// setting the manager runs with.
const managerGCPercent = 400

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("sidecarops-loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.sidecarSets, "sidecarsets", 100, "SidecarSets in the in-process server's fleet")
	fs.IntVar(&c.matching, "matching", 1, "SidecarSets of the fleet that select the pod (0: none, the answer has no patch)")
	fs.IntVar(&c.concurrency, "concurrency", 0, "requests in flight (closed loop: workers) (0: 2×GOMAXPROCS)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured duration, at most 5m")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured load before the run (connections, caches, GC pacing), at most 1m")
	fs.Int64Var(&c.requests, "requests", 0, "stop after this many measured requests (0: --duration alone bounds the run)")
	fs.Float64Var(&c.rate, "rate", 0, "open loop: send this many requests per second whatever the answers' pace (0: closed loop)")
	fs.StringVar(&c.url, "url", "", "pod webhook of a running server, https on a loopback address only, e.g. https://127.0.0.1:9443/mutate-pod (default: start one in-process)")
	fs.StringVar(&c.caFile, "ca-file", "", "with --url: PEM CA the server's certificate is checked against (default: the system's roots)")
	fs.StringVar(&c.serverName, "server-name", "", "with --url: TLS server name to check the certificate for, e.g. sidecarops-webhook.sidecarops-system.svc")
	fs.StringVar(&c.http, "http", "1.1", "HTTP version: 1.1 (a connection per request in flight, as the API server calls the manager, which serves HTTP/1.1 unless --enable-http2) or 2 (one multiplexed connection)")
	fs.IntVar(&c.cpus, "cpus", 0, "GOMAXPROCS for this process (0: all CPUs); in-process, client and server share them")
	fs.BoolVar(&c.decisionLog, "decision-log", true, "in-process server: encode the per-pod decision log line (the manager's default), into io.Discard")
	fs.BoolVar(&c.distinct, "distinct-pods", false, "give every pod a label of its own, so that the webhook's per-pod cache never answers one (default: a ReplicaSet's burst of alike pods, answered from the cache after the second)")
	fs.BoolVar(&c.floor, "floor", true, "after the run, measure the codec floor and the in-process handler (about 2s each)")
	fs.StringVar(&c.trace, "trace", "", "write a Go execution trace of the measured run to this file (go tool trace; keep --duration short, it grows by megabytes a second)")
	fs.IntVar(&c.gcPercent, "gc-percent", managerGCPercent, "Go GC target percentage of this process, as the manager's flag (default: the manager's); GOGC in the environment wins")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run (client and server alike when in-process) to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case c.duration <= 0 || c.duration > maxDuration:
		return c, fmt.Errorf("--duration %s: must be more than 0 and at most %s", c.duration, maxDuration)
	case c.warmup < 0 || c.warmup > time.Minute:
		return c, fmt.Errorf("--warmup %s: must be between 0 and 1m", c.warmup)
	case c.sidecarSets < 0 || c.matching < 0 || c.matching > c.sidecarSets:
		return c, fmt.Errorf("--sidecarsets %d --matching %d: need 0 ≤ matching ≤ sidecarsets", c.sidecarSets, c.matching)
	case c.concurrency < 0 || c.concurrency > 1024:
		return c, fmt.Errorf("--concurrency %d: must be between 1 and 1024", c.concurrency)
	case c.requests < 0 || c.rate < 0:
		return c, errors.New("--requests and --rate cannot be negative")
	case c.cpus < 0 || c.cpus > runtime.NumCPU():
		return c, fmt.Errorf("--cpus %d: this machine has %d", c.cpus, runtime.NumCPU())
	case c.http != "2" && c.http != "1.1":
		return c, fmt.Errorf("--http %q: 2 or 1.1", c.http)
	case c.url == "" && (set["ca-file"] || set["server-name"]):
		return c, errors.New("--ca-file and --server-name apply to --url only")
	case c.url != "" && (set["sidecarsets"] || set["decision-log"]):
		return c, errors.New("--sidecarsets and --decision-log configure the in-process server; with --url the server has its own")
	}
	if c.url != "" {
		if _, err := targetURL(c.url); err != nil {
			return c, err
		}
	}
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command; it returns the exit status: 0, 1 for errors during the run or any failed
// admission, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sidecarops-loadgen:", err)
		return 2
	}
	if err := load(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "sidecarops-loadgen:", err)
		return 1
	}
	return 0
}

// record starts writing a new file at path with start (a CPU profile, an execution trace) and
// returns the function that stops it with stop and closes the file; with path "" it records nothing.
func record(path string, start func(io.Writer) error, stop func()) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		stop()
		return f.Close()
	}, nil
}

// errFailedAdmissions is returned after the report when any admission failed.
var errFailedAdmissions = errors.New("some admissions failed (see errors above)")

func load(ctx context.Context, c config, stdout io.Writer) (err error) {
	if c.cpus > 0 {
		runtime.GOMAXPROCS(c.cpus)
	}
	if c.concurrency == 0 {
		c.concurrency = inFlightPerCPU * runtime.GOMAXPROCS(0)
	}
	// controller-runtime's packages log through its global logger and warn, with a stack trace,
	// when none is set; the server's failures reach the client as failed admissions anyway.
	ctrllog.SetLogger(logr.Discard())

	pod := admissionPod()
	if c.distinct {
		pod.Labels[distinctLabel] = uidTemplate
	}
	podRaw, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	body, uidAt, err := reviewBody(pod)
	if err != nil {
		return err
	}

	r := &report{
		inProcess: c.url == "", sidecarSets: c.sidecarSets, matching: c.matching, distinct: c.distinct,
		concurrency: c.concurrency, rate: c.rate, bodyBytes: len(body),
		gomaxprocs: runtime.GOMAXPROCS(0), numCPU: runtime.NumCPU(), errors: errorCounts{},
	}
	for _, v := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG"} {
		if s := os.Getenv(v); s != "" {
			r.runtimeEnv = strings.TrimSpace(r.runtimeEnv + " " + v + "=" + s)
		}
	}
	if os.Getenv("GOGC") == "" {
		// Client and server alike: they are one process.
		defer debug.SetGCPercent(debug.SetGCPercent(c.gcPercent))
		r.runtimeEnv = strings.TrimSpace(fmt.Sprintf("--gc-percent=%d %s", c.gcPercent, r.runtimeEnv))
	}
	opts := clientOptions{http2: c.http == "2", conns: c.concurrency, serverName: c.serverName}
	var srv *server
	if c.url == "" {
		sets, err := fleet.SidecarSets(c.sidecarSets, c.matching)
		if err != nil {
			return err
		}
		if srv, err = startServer(ctx, sets, c.decisionLog); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.stop()) }()
		r.target, r.compile, opts.pool = srv.url, srv.compile, srv.pool
	} else {
		u, err := targetURL(c.url)
		if err != nil {
			return err
		}
		r.target = u.String()
		if c.caFile != "" {
			pem, err := os.ReadFile(c.caFile)
			if err != nil {
				return err
			}
			opts.pool = x509.NewCertPool()
			if !opts.pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--ca-file %s: no PEM certificate", c.caFile)
			}
		}
	}
	var dials atomic.Int64
	client := newClient(opts, &dials)
	defer client.CloseIdleConnections()
	workers := make([]*worker, c.concurrency)
	for i := range workers {
		workers[i] = newWorker(uint32(i), client, r.target, body, uidAt, c.matching > 0)
	}

	// One request first, checked deeper than the run checks each: its patch must apply to the pod
	// and add the matching SidecarSets' containers.
	first, err := workers[0].do(ctx)
	if err != nil {
		return fmt.Errorf("first admission: %w", err)
	}
	if err := checkInjection(podRaw, first.response.Patch, c, len(pod.Spec.Containers)); err != nil {
		return fmt.Errorf("first admission: %w", err)
	}
	r.protocol, r.tlsVersion = first.proto, tls.VersionName(first.tls)

	if c.warmup > 0 {
		warm := runPhase(ctx, workers, &plan{deadline: time.Now().Add(c.warmup), rate: c.rate})
		// Failures while warming up are failures too: reported with the run's.
		r.errors.merge(warm.errors)
	}

	stopProfile, err := record(c.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return err
	}
	stopTrace, err := record(c.trace, trace.Start, trace.Stop)
	if err != nil {
		return errors.Join(err, stopProfile())
	}
	cpu0, cpuKnown := processCPU()
	busy0, busyKnown := machineBusy()
	res := runPhase(ctx, workers, &plan{deadline: time.Now().Add(c.duration), budget: c.requests, rate: c.rate})
	cpu1, _ := processCPU()
	busy1, _ := machineBusy()
	if err := errors.Join(stopProfile(), stopTrace()); err != nil {
		return err
	}
	if cpuKnown {
		r.cpu = cpu1 - cpu0
		if busyKnown {
			// Clamped at 0: /proc/stat counts in 10 ms ticks, this process's rusage finer.
			r.others = max(busy1-busy0-r.cpu, 0)
		}
	}
	r.elapsed, r.ok, r.conns = res.elapsed, len(res.latencies), dials.Load()
	r.latency = summarize(res.latencies)
	r.errors.merge(res.errors)
	if ctx.Err() != nil {
		// Interrupted: what was measured so far, without the floors; the requests the interrupt
		// cut short are among the errors.
		r.print(stdout)
		return ctx.Err()
	}

	if c.floor {
		// After the run, never during it: each takes the CPUs for about a second.
		if r.floor, err = measure(func() error { return codecRoundTrip(body, first.response.Patch) }); err != nil {
			return fmt.Errorf("codec floor: %w", err)
		}
		if srv != nil {
			if r.handler, err = measure(serveInProcess(srv.mux, webhook.PodPath, body)); err != nil {
				return fmt.Errorf("in-process handler: %w", err)
			}
		}
	}
	r.print(stdout)
	if r.errors.total() > 0 {
		return errFailedAdmissions
	}
	return nil
}

// checkInjection applies patch to the pod and checks it gained the matching SidecarSets'
// containers: one each in the in-process fleet, at least one from a server of unknown fleet.
func checkInjection(podRaw, patch []byte, c config, containers int) error {
	if c.matching == 0 {
		return nil
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return fmt.Errorf("decoding the JSON patch: %w", err)
	}
	patched, err := p.Apply(podRaw)
	if err != nil {
		return fmt.Errorf("applying the JSON patch to the pod: %w", err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(patched, &out); err != nil {
		return fmt.Errorf("decoding the patched pod: %w", err)
	}
	got := len(out.Spec.Containers) - containers
	if c.url == "" && got != c.matching {
		return fmt.Errorf("the patch adds %d containers, want %d (one per matching SidecarSet)", got, c.matching)
	}
	if got < 1 {
		return errors.New("the patch adds no container although a SidecarSet matches")
	}
	return nil
}

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/webhook"
)

// podCase is one way a pod creation meets the webhooks; both pod creation benchmarks run them.
type podCase struct {
	name, ns string
	labels   map[string]string
	injected bool
}

// podCases: our webhook injecting; the floor webhook (floorWebhook) injecting the same patch at no
// cost of its own; ours registered but the pod selected by no SidecarSet (the prefilter's match
// condition spares the call); a namespace labelled control-plane, which ours leaves out as
// OpenKruise's does (excludedNamespace), where no webhook is called. ns is benchSetup's.
func podCases(ns string) []podCase {
	return []podCase{
		{"injected", ns, map[string]string{"app": "bench"}, true},
		{"floor", excludedNamespace, map[string]string{"app": "bench", floorLabel: "true"}, true},
		{"nomatch", ns, map[string]string{"app": "other"}, false},
		{"nowebhook", excludedNamespace, map[string]string{"app": "bench"}, false},
	}
}

// excludedNamespace is a namespace the pod webhook's namespaceSelector leaves out (config/webhook).
const excludedNamespace = "e2e-bench-control-plane"

// create creates the case's pod named name through the API server and checks that it was injected
// or not as the case says; it returns how long the create call took.
func (c podCase) create(b *testing.B, name string) time.Duration {
	b.Helper()
	p := pod(c.ns, name, c.labels)
	start := time.Now()
	if err := cluster.Client.Create(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if got := len(p.Spec.Containers) == 2; got != c.injected {
		b.Fatalf("pod %s/%s injected=%v, want %v", p.Namespace, p.Name, got, c.injected)
	}
	return took
}

// BenchmarkPodCreate measures pod creation through the real API server (etcd write included), the
// podCases in one run (ns/op is one of each):
//
//	make envtest-bins && KUBEBUILDER_ASSETS=<printed dir> go test -run '^$' -bench 'PodCreate$' -benchtime 300x ./test/e2e/
//
// p50/p99 are reported besides the mean (ns/op) because the overhead a webhook adds is a latency
// distribution question.
func BenchmarkPodCreate(b *testing.B) {
	ns := benchSetup(b)
	startFloorWebhook(b)

	// Pods rotate between the cases, so they share every condition of the run (etcd's state, the
	// machine's load): the differences are the webhooks'.
	cases := podCases(ns)
	series := map[string][]time.Duration{}
	handlerSum0, handlerCount0 := podHandlerTime(b)
	i := 0
	for b.Loop() {
		for _, c := range cases {
			series[c.name] = append(series[c.name], c.create(b, fmt.Sprintf("bench%d-%s-%d", benchRuns, c.name, i)))
		}
		i++
	}
	pct := func(name string, q int) float64 {
		sorted := append([]time.Duration(nil), series[name]...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		return float64(sorted[len(sorted)*q/100].Microseconds())
	}
	b.ReportMetric(pct("injected", 50), "webhook-p50-µs")
	b.ReportMetric(pct("injected", 99), "webhook-p99-µs")
	b.ReportMetric(pct("floor", 50), "floor-p50-µs")
	b.ReportMetric(pct("nomatch", 50), "nomatch-p50-µs")
	b.ReportMetric(pct("nowebhook", 50), "nowebhook-p50-µs")
	b.ReportMetric(pct("nowebhook", 99), "nowebhook-p99-µs")
	b.ReportMetric(100*(pct("injected", 50)/pct("nowebhook", 50)-1), "p50-overhead-%")
	b.ReportMetric(100*(pct("floor", 50)/pct("nowebhook", 50)-1), "floor-p50-overhead-%")
	b.ReportMetric(100*(pct("nomatch", 50)/pct("nowebhook", 50)-1), "nomatch-p50-overhead-%")
	// What of the overhead is the handler's own work (our histogram) rather than the API server's
	// webhook call (encoding, TLS, HTTP, patch application).
	handlerSum, handlerCount := podHandlerTime(b)
	if n := handlerCount - handlerCount0; n > 0 {
		b.ReportMetric(1e6*(handlerSum-handlerSum0)/float64(n), "handler-mean-µs")
		b.ReportMetric(float64(n)/float64(len(series["injected"])+len(series["nomatch"])), "calls/pod")
	}
}

// benchSetup prepares a pod creation benchmark: the manager's GC setting for the run, the
// namespace and the SidecarSet selecting app=bench, compiled in; it returns the namespace.
func benchSetup(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	if os.Getenv("GOGC") == "" {
		// The manager runs in this process: give it the GC setting the sidecarops-manager binary
		// runs with (its --gc-percent default, cmd/sidecarops-manager DefaultGCPercent).
		old := debug.SetGCPercent(400)
		b.Cleanup(func() { debug.SetGCPercent(old) })
	}
	ns := "e2e-bench"
	// -count > 1 runs this again on the same cluster.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: excludedNamespace, Labels: map[string]string{podwebhook.KruiseControlPlaneLabel: "bench"}}},
		sidecarSet("e2e-bench", map[string]string{"app": "bench"}, "bench-agent"),
	} {
		if err := cluster.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	benchRuns++
	// Let the loader compile the SidecarSet in before measuring.
	probe := pod(ns, "probe", map[string]string{"app": "bench"})
	deadline := time.Now().Add(timeout)
	for {
		c := probe.DeepCopy()
		if err := cluster.Client.Create(ctx, c, client.DryRunAll); err != nil {
			b.Fatal(err)
		}
		if c.Annotations[v1beta1.SidecarSetListAnnotation] != "" {
			return ns
		}
		if time.Now().After(deadline) {
			b.Fatal("SidecarSet never compiled in")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkWebhookCallCPU attributes the CPU of pod creation: per case (as BenchmarkPodCreate's, but
// one case after the other, so each process's CPU can be counted; what a case sets off
// asynchronously while it runs, such as the SidecarSet controller reacting to injected pods, counts
// against it), the CPU time kube-apiserver
// used per pod and the CPU time this process — the manager and the client — used per pod
// (/proc/PID/stat and getrusage; 10 ms ticks for the API server, so use a few hundred pods):
//
//	KUBEBUILDER_ASSETS=<dir> go test -run '^$' -bench WebhookCallCPU -benchtime 300x ./test/e2e/
func BenchmarkWebhookCallCPU(b *testing.B) {
	ns := benchSetup(b)
	startFloorWebhook(b)
	apiServer := apiServerPID(b)
	for _, c := range podCases(ns) {
		b.Run(c.name, func(b *testing.B) {
			// What the previous case set off asynchronously (the controller reacting to injected
			// pods) must not be counted against this one.
			time.Sleep(time.Second)
			api0, self0 := processCPU(b, apiServer), selfCPU(b)
			for b.Loop() {
				cpuPods++ // the framework may call this function more than once
				c.create(b, fmt.Sprintf("cpu-%s-%d", c.name, cpuPods))
			}
			b.ReportMetric(float64((processCPU(b, apiServer)-api0).Microseconds())/float64(b.N), "apiserver-cpu-µs/pod")
			b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "manager+client-cpu-µs/pod")
		})
	}
}

// cpuPods numbers BenchmarkWebhookCallCPU's pods so names never repeat.
var cpuPods int

// apiServerPID finds the kube-apiserver process of this test's cluster by its --secure-port.
func apiServerPID(b *testing.B) int {
	b.Helper()
	u, err := url.Parse(cluster.Config.Host)
	if err != nil {
		b.Fatal(err)
	}
	want := "--secure-port=" + u.Port()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "kube-apiserver") && slices.Contains(args, want) {
			return pid
		}
	}
	b.Skipf("no kube-apiserver process with %s", want)
	return 0
}

// processCPU is devcluster.ProcessCPU, failing the benchmark if it cannot be read.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	cpu, err := devcluster.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// selfCPU is the user+system CPU time this process has used.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRuns numbers BenchmarkPodCreate's invocations so pod names never repeat.
var benchRuns int

// podHandlerTime reads the pod webhook's latency histogram from the manager's metrics registry
// (the manager runs in this process).
func podHandlerTime(tb testing.TB) (sum float64, count uint64) {
	tb.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sidecarops_webhook_admission_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == webhook.PodPath {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	tb.Fatal("no pod webhook latency histogram")
	return 0, 0
}
